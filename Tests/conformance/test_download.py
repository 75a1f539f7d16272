"""files/download: Dropbox-API-Result, HTTP Range (206/416), ids, revs, errors."""

import json

import pytest

from dropbox import exceptions as dbx_exc
from dropbox.files import FileMetadata, WriteMode

from dbxemu import dropbox_content_hash, payload

SIZE = 1000


@pytest.fixture
def stored(dbx, base):
    data = payload(SIZE, 42)
    md = dbx.files_upload(data, base + "/range.bin")
    return md, data


def test_download_body_and_result_header(emu, dbx, stored):
    md, data = stored
    got_md, resp = dbx.files_download(md.path_display)
    assert isinstance(got_md, FileMetadata)
    assert (got_md.id, got_md.rev, got_md.size, got_md.content_hash) == (md.id, md.rev, SIZE, md.content_hash)
    assert resp.status_code == 200
    assert resp.content == data
    raw = emu.content("files/download", {"path": md.path_lower})
    assert raw.status_code == 200
    assert raw.headers["Content-Type"].startswith("application/octet-stream")
    result = json.loads(raw.headers["Dropbox-API-Result"])
    assert result["rev"] == md.rev and result["size"] == SIZE
    assert raw.content == data
    # The SDK used the content host for download and upload.
    assert ("content.dropbox-emulator.test", "/2/files/download") in dbx._session.adapter.seen


@pytest.mark.parametrize(
    "range_header,start,end",
    [
        ("bytes=10-19", 10, 19),
        ("bytes=0-0", 0, 0),
        ("bytes=990-", 990, SIZE - 1),
        ("bytes=-5", SIZE - 5, SIZE - 1),
        ("bytes=900-5000", 900, SIZE - 1),  # end clamped to the last byte
    ],
)
def test_download_range_206(dbx, stored, range_header, start, end):
    md, data = stored
    got_md, resp = dbx.files_download(md.path_lower, extra_headers={"Range": range_header})
    assert resp.status_code == 206
    assert resp.headers["Content-Range"] == "bytes %d-%d/%d" % (start, end, SIZE)
    assert resp.content == data[start : end + 1]
    if "Content-Length" in resp.headers:
        assert int(resp.headers["Content-Length"]) == end - start + 1
    assert got_md.size == SIZE  # metadata describes the whole file


def test_download_range_unsatisfiable_416(emu, dbx, stored):
    md, _ = stored
    r = emu.content("files/download", {"path": md.path_lower}, headers={"Range": "bytes=%d-" % SIZE})
    assert r.status_code == 416
    assert r.headers.get("Content-Range") == "bytes */%d" % SIZE
    with pytest.raises(dbx_exc.HttpError) as ei:
        dbx.files_download(md.path_lower, extra_headers={"Range": "bytes=5000-6000"})
    assert ei.value.status_code == 416


def test_download_by_id_after_move(dbx, stored, base):
    md, data = stored
    dbx.files_move_v2(md.path_lower, base + "/moved/renamed.bin")
    got_md, resp = dbx.files_download(md.id)
    assert got_md.path_display == base + "/moved/renamed.bin"
    assert resp.content == data


def test_download_old_revision(dbx, base):
    p = base + "/versions.txt"
    v1 = dbx.files_upload(b"version one", p)
    v2 = dbx.files_upload(b"version two", p, mode=WriteMode.overwrite)
    md_old, resp = dbx.files_download(p, rev=v1.rev)
    assert resp.content == b"version one" and md_old.rev == v1.rev
    md_new, resp = dbx.files_download(p)
    assert resp.content == b"version two" and md_new.rev == v2.rev


def test_download_missing_is_not_found(dbx, base):
    with pytest.raises(dbx_exc.ApiError) as ei:
        dbx.files_download(base + "/nothing.bin")
    err = ei.value.error  # DownloadError
    assert err.is_path() and err.get_path().is_not_found(), err


def test_download_folder_is_not_file(dbx, base):
    dbx.files_create_folder_v2(base + "/dir")
    with pytest.raises(dbx_exc.ApiError) as ei:
        dbx.files_download(base + "/dir")
    assert ei.value.error.get_path().is_not_file()


def test_download_unicode_name_result_header_is_ascii(emu, dbx, base):
    name = "résumé – 日本.txt"
    dbx.files_upload(b"unicode", base + "/" + name)
    r = emu.content("files/download", {"path": base + "/" + name})
    assert r.status_code == 200
    raw_header = r.raw.headers.get("Dropbox-API-Result")
    raw_header.encode("ascii")  # must be HTTP-header safe: \uXXXX escapes only
    assert json.loads(raw_header)["name"] == name
    md, resp = dbx.files_download(base + "/" + name)
    assert md.name == name and resp.content == b"unicode"


def test_download_large_file_integrity(dbx, base):
    data = payload(5 * 1024 * 1024 + 123, 9)
    dbx.files_upload(data, base + "/large.bin")
    md, resp = dbx.files_download(base + "/large.bin")
    body = resp.content
    assert len(body) == len(data) and body == data
    assert dropbox_content_hash(body) == md.content_hash
