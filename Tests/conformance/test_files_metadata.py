"""files/get_metadata and the metadata produced by files/upload:
ids, revs, content_hash, case-insensitive / case-preserving paths, unicode."""

import re
from datetime import datetime

import pytest

from dropbox import exceptions as dbx_exc
from dropbox.files import DeletedMetadata, FileMetadata, FolderMetadata, WriteMode

from dbxemu import dropbox_content_hash, payload

REV_RE = re.compile(r"^[0-9a-f]{9,}$")


def test_upload_returns_complete_file_metadata(dbx, base):
    data = payload(1000)
    md = dbx.files_upload(data, base + "/Report.TXT")
    assert isinstance(md, FileMetadata)
    assert md.name == "Report.TXT"
    assert md.path_display == base + "/Report.TXT"
    assert md.path_lower == (base + "/Report.TXT").lower()
    assert md.size == 1000
    assert md.id.startswith("id:") and len(md.id) > 3
    assert REV_RE.match(md.rev)
    assert md.content_hash == dropbox_content_hash(data)
    assert md.is_downloadable
    assert isinstance(md.server_modified, datetime) and isinstance(md.client_modified, datetime)


def test_get_metadata_matches_upload(dbx, base):
    up = dbx.files_upload(b"hello", base + "/a.txt")
    md = dbx.files_get_metadata(base + "/a.txt")
    assert isinstance(md, FileMetadata)
    assert (md.id, md.rev, md.size, md.content_hash, md.path_display) == (
        up.id, up.rev, up.size, up.content_hash, up.path_display)


def test_upload_creates_parent_folders(dbx, base):
    dbx.files_upload(b"x", base + "/p/q/leaf.txt")
    for folder in (base, base + "/p", base + "/p/q"):
        md = dbx.files_get_metadata(folder)
        assert isinstance(md, FolderMetadata), (folder, md)
        assert md.id.startswith("id:")
        assert md.path_lower == folder.lower()


def test_get_metadata_not_found(dbx, base):
    with pytest.raises(dbx_exc.ApiError) as ei:
        dbx.files_get_metadata(base + "/missing.txt")
    err = ei.value.error  # GetMetadataError
    assert err.is_path() and err.get_path().is_not_found(), err


def test_get_metadata_missing_parent_is_not_found(dbx, base):
    with pytest.raises(dbx_exc.ApiError) as ei:
        dbx.files_get_metadata(base + "/no/such/dir/file.txt")
    assert ei.value.error.get_path().is_not_found()


def test_paths_are_case_insensitive_and_case_preserving(dbx, base):
    dbx.files_upload(b"casey", base + "/MixedCase/ReadMe.Md")
    md = dbx.files_get_metadata((base + "/mixedcase/README.MD").upper())
    assert md.name == "ReadMe.Md"
    assert md.path_lower == (base + "/mixedcase/readme.md").lower()
    folder = dbx.files_get_metadata(base.lower() + "/MIXEDCASE")
    assert isinstance(folder, FolderMetadata) and folder.name == "MixedCase"


def test_get_metadata_by_id(dbx, base):
    up = dbx.files_upload(b"by id", base + "/byid.txt")
    md = dbx.files_get_metadata(up.id)
    assert md.path_display == up.path_display and md.rev == up.rev
    folder = dbx.files_get_metadata(base)
    assert dbx.files_get_metadata(folder.id).path_lower == base.lower()


def test_get_metadata_unknown_id_not_found(dbx):
    with pytest.raises(dbx_exc.ApiError) as ei:
        dbx.files_get_metadata("id:AAAAAAAAAAAAAAAAAAAAAA")
    assert ei.value.error.get_path().is_not_found()


def test_deleted_file_metadata_with_include_deleted(dbx, base):
    dbx.files_upload(b"gone soon", base + "/gone.txt")
    dbx.files_delete_v2(base + "/gone.txt")
    with pytest.raises(dbx_exc.ApiError) as ei:
        dbx.files_get_metadata(base + "/gone.txt")
    assert ei.value.error.get_path().is_not_found()
    md = dbx.files_get_metadata(base + "/gone.txt", include_deleted=True)
    assert isinstance(md, DeletedMetadata)
    assert md.name == "gone.txt" and md.path_lower == (base + "/gone.txt").lower()


def test_content_hash_uses_4mib_blocks(dbx, base):
    data = payload(4 * 1024 * 1024 + 4096, 7)
    md = dbx.files_upload(data, base + "/big.bin")
    assert md.size == len(data)
    assert md.content_hash == dropbox_content_hash(data)
    import hashlib
    assert md.content_hash != hashlib.sha256(data).hexdigest()


def test_empty_file(dbx, base):
    md = dbx.files_upload(b"", base + "/empty")
    assert md.size == 0
    assert md.content_hash == dropbox_content_hash(b"")  # sha256 of no digests


def test_unicode_names_round_trip(dbx, base):
    name = "Ünïcødé ✓ 文件 Ωmega.txt"  # no ß: "ß".upper() == "SS"
    md = dbx.files_upload("données".encode(), base + "/" + name)
    assert md.name == name
    got = dbx.files_get_metadata(base + "/" + name.upper())
    assert got.name == name and got.id == md.id
    listed = [e.name for e in dbx.files_list_folder(base).entries]
    assert name in listed


def test_overwrite_changes_rev_keeps_id(dbx, base):
    p = base + "/ow.txt"
    first = dbx.files_upload(b"one", p)
    second = dbx.files_upload(b"two!", p, mode=WriteMode.overwrite)
    assert second.id == first.id
    assert second.rev != first.rev
    assert second.size == 4 and second.content_hash == dropbox_content_hash(b"two!")
    assert dbx.files_get_metadata(p).rev == second.rev


def test_client_modified_round_trips(dbx, base):
    when = datetime(2015, 5, 12, 15, 50, 38)
    md = dbx.files_upload(b"dated", base + "/dated.txt", client_modified=when)
    assert md.client_modified == when
    assert dbx.files_get_metadata(base + "/dated.txt").client_modified == when


def test_get_metadata_by_rev_path(dbx, base):
    # GetMetadataArg.path is a ReadPath: "(/...|id:...)|(rev:[0-9a-f]{9,})|(ns:...)".
    up = dbx.files_upload(b"rev addressed", base + "/byrev.txt")
    md = dbx.files_get_metadata("rev:" + up.rev)
    assert isinstance(md, FileMetadata)
    assert (md.id, md.rev, md.path_lower) == (up.id, up.rev, up.path_lower)
