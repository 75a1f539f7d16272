"""files/upload (write modes, conflicts, names, hashes) and upload sessions
(sequential, concurrent, finish, finish_batch v1/v2 + check)."""

import time

import pytest

from dropbox import exceptions as dbx_exc
from dropbox.files import CommitInfo, UploadSessionCursor, UploadSessionFinishArg, UploadSessionType, WriteMode

from dbxemu import BLOCK, dropbox_content_hash, payload


def upload_error_reason(excinfo):
    """UploadError.path -> UploadWriteFailed.reason (a WriteError)."""
    err = excinfo.value.error
    assert err.is_path(), err
    return err.get_path().reason


# --------------------------------------------------------------------------- write modes


def test_add_mode_conflict(dbx, base):
    p = base + "/c.txt"
    dbx.files_upload(b"first", p)
    with pytest.raises(dbx_exc.ApiError) as ei:
        dbx.files_upload(b"second", p, mode=WriteMode.add)
    reason = upload_error_reason(ei)
    assert reason.is_conflict() and reason.get_conflict().is_file(), reason
    assert dbx.files_download(p)[1].content == b"first"


def test_add_mode_identical_content_is_not_a_conflict(dbx, base):
    p = base + "/same.txt"
    first = dbx.files_upload(b"same bytes", p)
    again = dbx.files_upload(b"same bytes", p)  # docs: no conflict unless strict_conflict
    assert again.rev == first.rev and again.id == first.id


def test_strict_conflict_with_identical_content(dbx, base):
    p = base + "/strict.txt"
    dbx.files_upload(b"same bytes", p)
    with pytest.raises(dbx_exc.ApiError) as ei:
        dbx.files_upload(b"same bytes", p, strict_conflict=True)
    assert upload_error_reason(ei).is_conflict()


def test_add_mode_autorename(dbx, base):
    p = base + "/doc.txt"
    dbx.files_upload(b"original", p)
    r1 = dbx.files_upload(b"copy one", p, autorename=True)
    r2 = dbx.files_upload(b"copy two", p, autorename=True)
    assert r1.name == "doc (1).txt" and r2.name == "doc (2).txt"
    assert dbx.files_download(p)[1].content == b"original"
    assert dbx.files_download(r1.path_lower)[1].content == b"copy one"


def test_update_mode_with_matching_rev(dbx, base):
    p = base + "/upd.txt"
    v1 = dbx.files_upload(b"v1", p)
    v2 = dbx.files_upload(b"v2", p, mode=WriteMode.update(v1.rev))
    assert v2.rev != v1.rev and v2.id == v1.id
    assert dbx.files_download(p)[1].content == b"v2"


def test_update_mode_with_stale_rev_conflicts(dbx, base):
    p = base + "/stale.txt"
    v1 = dbx.files_upload(b"v1", p)
    dbx.files_upload(b"v2", p, mode=WriteMode.overwrite)
    with pytest.raises(dbx_exc.ApiError) as ei:
        dbx.files_upload(b"v3", p, mode=WriteMode.update(v1.rev))
    assert upload_error_reason(ei).is_conflict()
    assert dbx.files_download(p)[1].content == b"v2"
    # With autorename the upload lands in a "conflicted copy".
    md = dbx.files_upload(b"v3", p, mode=WriteMode.update(v1.rev), autorename=True)
    assert md.path_lower != p.lower() and "conflicted copy" in md.name
    assert md.name.startswith("stale (") and md.name.endswith(").txt")


def test_overwrite_creates_when_missing(dbx, base):
    md = dbx.files_upload(b"fresh", base + "/new.txt", mode=WriteMode.overwrite)
    assert md.size == 5


def test_upload_below_a_file_is_file_ancestor_conflict(dbx, base):
    dbx.files_upload(b"i am a file", base + "/blocker")
    with pytest.raises(dbx_exc.ApiError) as ei:
        dbx.files_upload(b"child", base + "/blocker/child.txt")
    reason = upload_error_reason(ei)
    assert reason.is_conflict() and reason.get_conflict().is_file_ancestor(), reason


def test_upload_onto_folder_is_folder_conflict(dbx, base):
    dbx.files_create_folder_v2(base + "/dir")
    with pytest.raises(dbx_exc.ApiError) as ei:
        dbx.files_upload(b"x", base + "/dir", mode=WriteMode.overwrite)
    reason = upload_error_reason(ei)
    assert reason.is_conflict() and reason.get_conflict().is_folder(), reason


@pytest.mark.parametrize("name", ["desktop.ini", "Thumbs.db", ".DS_Store", ".dropbox"])
def test_disallowed_names(dbx, base, name):
    with pytest.raises(dbx_exc.ApiError) as ei:
        dbx.files_upload(b"meta", base + "/" + name)
    assert upload_error_reason(ei).is_disallowed_name()
    with pytest.raises(dbx_exc.ApiError):
        dbx.files_get_metadata(base + "/" + name)


def test_content_hash_mismatch_rejected(dbx, base):
    with pytest.raises(dbx_exc.ApiError) as ei:
        dbx.files_upload(b"actual bytes", base + "/h.txt", content_hash=dropbox_content_hash(b"other bytes"))
    assert ei.value.error.is_content_hash_mismatch()
    with pytest.raises(dbx_exc.ApiError):
        dbx.files_get_metadata(base + "/h.txt")


# --------------------------------------------------------------------------- sequential sessions


def test_sequential_session_round_trip(dbx, base):
    data = payload(300_000, 5)
    parts = [data[:100_000], data[100_000:250_000], data[250_000:]]
    sid = dbx.files_upload_session_start(parts[0]).session_id
    assert sid
    dbx.files_upload_session_append_v2(parts[1], UploadSessionCursor(sid, 100_000))
    md = dbx.files_upload_session_finish(
        parts[2], UploadSessionCursor(sid, 250_000), CommitInfo(base + "/session.bin"))
    assert md.size == len(data)
    assert md.content_hash == dropbox_content_hash(data)
    assert dbx.files_download(md.path_lower)[1].content == data


def test_append_incorrect_offset_reports_correct_offset(dbx):
    sid = dbx.files_upload_session_start(b"a" * 100).session_id
    with pytest.raises(dbx_exc.ApiError) as ei:
        dbx.files_upload_session_append_v2(b"b" * 10, UploadSessionCursor(sid, 50))
    err = ei.value.error  # UploadSessionAppendError
    assert err.is_incorrect_offset(), err
    assert err.get_incorrect_offset().correct_offset == 100
    # Resuming at the reported offset works.
    dbx.files_upload_session_append_v2(b"b" * 10, UploadSessionCursor(sid, 100))


def test_finish_incorrect_offset(dbx, base):
    sid = dbx.files_upload_session_start(b"z" * 64).session_id
    with pytest.raises(dbx_exc.ApiError) as ei:
        dbx.files_upload_session_finish(b"", UploadSessionCursor(sid, 10), CommitInfo(base + "/f.bin"))
    err = ei.value.error  # UploadSessionFinishError
    assert err.is_lookup_failed() and err.get_lookup_failed().is_incorrect_offset(), err
    assert err.get_lookup_failed().get_incorrect_offset().correct_offset == 64


def test_unknown_session_not_found(dbx):
    with pytest.raises(dbx_exc.ApiError) as ei:
        dbx.files_upload_session_append_v2(b"x", UploadSessionCursor("no-such-session-id", 0))
    assert ei.value.error.is_not_found()


def test_closed_session_rejects_append_but_finishes(dbx, base):
    sid = dbx.files_upload_session_start(b"closed!", close=True).session_id
    with pytest.raises(dbx_exc.ApiError) as ei:
        dbx.files_upload_session_append_v2(b"more", UploadSessionCursor(sid, 7))
    assert ei.value.error.is_closed()
    md = dbx.files_upload_session_finish(b"", UploadSessionCursor(sid, 7), CommitInfo(base + "/closed.txt"))
    assert md.size == 7
    # A finished session is gone.
    with pytest.raises(dbx_exc.ApiError) as ei:
        dbx.files_upload_session_append_v2(b"x", UploadSessionCursor(sid, 7))
    assert ei.value.error.is_not_found() or ei.value.error.is_closed()


def test_session_finish_path_conflict(dbx, base):
    p = base + "/target.txt"
    dbx.files_upload(b"existing", p)
    sid = dbx.files_upload_session_start(b"session data").session_id
    with pytest.raises(dbx_exc.ApiError) as ei:
        dbx.files_upload_session_finish(b"", UploadSessionCursor(sid, 12), CommitInfo(p))
    err = ei.value.error
    assert err.is_path() and err.get_path().is_conflict(), err
    assert dbx.files_download(p)[1].content == b"existing"


# --------------------------------------------------------------------------- concurrent sessions


def test_concurrent_session_out_of_order(dbx, base):
    data = payload(2 * BLOCK + 1000, 11)
    sid = dbx.files_upload_session_start(b"", session_type=UploadSessionType.concurrent).session_id
    dbx.files_upload_session_append_v2(data[BLOCK : 2 * BLOCK], UploadSessionCursor(sid, BLOCK))
    dbx.files_upload_session_append_v2(data[:BLOCK], UploadSessionCursor(sid, 0))
    dbx.files_upload_session_append_v2(data[2 * BLOCK :], UploadSessionCursor(sid, 2 * BLOCK), close=True)
    md = dbx.files_upload_session_finish(b"", UploadSessionCursor(sid, len(data)), CommitInfo(base + "/conc.bin"))
    assert md.size == len(data)
    assert md.content_hash == dropbox_content_hash(data)
    assert dbx.files_download(md.path_lower)[1].content == data


def test_concurrent_start_rejects_data_and_close(dbx):
    with pytest.raises(dbx_exc.ApiError) as ei:
        dbx.files_upload_session_start(b"data", session_type=UploadSessionType.concurrent)
    assert ei.value.error.is_concurrent_session_data_not_allowed()
    with pytest.raises(dbx_exc.ApiError) as ei:
        dbx.files_upload_session_start(b"", close=True, session_type=UploadSessionType.concurrent)
    assert ei.value.error.is_concurrent_session_close_not_allowed()


def test_concurrent_append_must_be_4mib_multiple(dbx):
    sid = dbx.files_upload_session_start(b"", session_type=UploadSessionType.concurrent).session_id
    with pytest.raises(dbx_exc.ApiError) as ei:
        dbx.files_upload_session_append_v2(b"q" * 1000, UploadSessionCursor(sid, 0))
    assert ei.value.error.is_concurrent_session_invalid_data_size(), ei.value.error
    with pytest.raises(dbx_exc.ApiError) as ei:
        dbx.files_upload_session_append_v2(b"q" * 1000, UploadSessionCursor(sid, 1000), close=True)
    assert ei.value.error.is_concurrent_session_invalid_offset(), ei.value.error


def test_concurrent_finish_with_missing_data(dbx, base):
    sid = dbx.files_upload_session_start(b"", session_type=UploadSessionType.concurrent).session_id
    dbx.files_upload_session_append_v2(b"t" * 10, UploadSessionCursor(sid, BLOCK), close=True)
    with pytest.raises(dbx_exc.ApiError) as ei:
        dbx.files_upload_session_finish(b"", UploadSessionCursor(sid, BLOCK + 10), CommitInfo(base + "/gap.bin"))
    assert ei.value.error.is_concurrent_session_missing_data(), ei.value.error


# --------------------------------------------------------------------------- batch finish


def _closed_session(dbx, data):
    sid = dbx.files_upload_session_start(data, close=True).session_id
    return UploadSessionCursor(sid, len(data))


def test_finish_batch_v2_mixed_results(dbx, base):
    datas = [payload(100 + i, i) for i in range(3)]
    entries = [UploadSessionFinishArg(_closed_session(dbx, d), CommitInfo("%s/b%d.bin" % (base, i)))
               for i, d in enumerate(datas)]
    entries.insert(1, UploadSessionFinishArg(UploadSessionCursor("bogus-session", 0), CommitInfo(base + "/bad.bin")))
    res = dbx.files_upload_session_finish_batch_v2(entries)
    assert len(res.entries) == 4
    bad = res.entries[1]
    assert bad.is_failure() and bad.get_failure().is_lookup_failed()
    assert bad.get_failure().get_lookup_failed().is_not_found()
    for j, e in enumerate((res.entries[0], res.entries[2], res.entries[3])):
        assert e.is_success(), e
        md = e.get_success()
        assert md.path_lower == ("%s/b%d.bin" % (base, j)).lower()
        assert md.content_hash == dropbox_content_hash(datas[j])


def test_finish_batch_requires_closed_sessions(dbx, base):
    sid = dbx.files_upload_session_start(b"open session").session_id
    res = dbx.files_upload_session_finish_batch_v2(
        [UploadSessionFinishArg(UploadSessionCursor(sid, 12), CommitInfo(base + "/open.bin"))])
    e = res.entries[0]
    assert e.is_failure() and e.get_failure().is_lookup_failed()
    assert e.get_failure().get_lookup_failed().is_not_closed()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_finish_batch_v1_and_check(dbx, base):
    datas = [payload(50, 20 + i) for i in range(2)]
    entries = [UploadSessionFinishArg(_closed_session(dbx, d), CommitInfo("%s/v1-%d.bin" % (base, i)))
               for i, d in enumerate(datas)]
    launch = dbx.files_upload_session_finish_batch(entries)
    if launch.is_async_job_id():
        job = launch.get_async_job_id()
        deadline = time.monotonic() + 20
        while True:
            status = dbx.files_upload_session_finish_batch_check(job)
            if status.is_complete():
                result = status.get_complete()
                break
            assert status.is_in_progress()
            assert time.monotonic() < deadline, "finish_batch job never completed"
            time.sleep(0.2)
    else:
        assert launch.is_complete(), launch
        result = launch.get_complete()
    assert len(result.entries) == 2
    for i, e in enumerate(result.entries):
        assert e.is_success(), e
        assert e.get_success().content_hash == dropbox_content_hash(datas[i])
    assert dbx.files_download("%s/v1-1.bin" % base)[1].content == datas[1]


def test_finish_batch_check_unknown_job(dbx):
    with pytest.raises(dbx_exc.ApiError) as ei:
        dbx.files_upload_session_finish_batch_check("dbjid:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
    assert ei.value.error.is_invalid_async_job_id()
