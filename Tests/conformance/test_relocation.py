"""files/create_folder_v2, files/delete_v2, files/delete_batch (and its check), files/move_v2,
files/move_batch_v2 (and its check), files/copy_v2."""

import time

import pytest

from dropbox import exceptions as dbx_exc
from dropbox.files import DeleteArg, DeletedMetadata, FileMetadata, FolderMetadata, RelocationPath, WriteMode

from dbxemu import payload


def assert_gone(dbx, path):
    with pytest.raises(dbx_exc.ApiError) as ei:
        dbx.files_get_metadata(path)
    assert ei.value.error.get_path().is_not_found(), path


# --------------------------------------------------------------------------- create_folder_v2


def test_create_folder_returns_folder_metadata(dbx, base):
    res = dbx.files_create_folder_v2(base + "/New Folder")
    md = res.metadata
    assert isinstance(md, FolderMetadata)
    assert md.name == "New Folder" and md.path_display == base + "/New Folder"
    assert md.id.startswith("id:")
    assert dbx.files_get_metadata(md.id).path_lower == (base + "/new folder").lower()


def test_create_folder_creates_missing_parents(dbx, base):
    dbx.files_create_folder_v2(base + "/a/b/c")
    assert isinstance(dbx.files_get_metadata(base + "/a/b"), FolderMetadata)


def test_create_folder_conflicts(dbx, base):
    dbx.files_create_folder_v2(base + "/dup")
    with pytest.raises(dbx_exc.ApiError) as ei:
        dbx.files_create_folder_v2(base + "/DUP")  # case-insensitive
    err = ei.value.error  # CreateFolderError.path -> WriteError
    assert err.is_path() and err.get_path().is_conflict() and err.get_path().get_conflict().is_folder(), err
    dbx.files_upload(b"f", base + "/afile")
    with pytest.raises(dbx_exc.ApiError) as ei:
        dbx.files_create_folder_v2(base + "/afile")
    assert ei.value.error.get_path().get_conflict().is_file()


def test_create_folder_autorename(dbx, base):
    dbx.files_create_folder_v2(base + "/photos")
    md = dbx.files_create_folder_v2(base + "/photos", autorename=True).metadata
    assert md.name == "photos (1)"


def test_create_folder_disallowed_name(dbx, base):
    with pytest.raises(dbx_exc.ApiError) as ei:
        dbx.files_create_folder_v2(base + "/.dropbox")
    assert ei.value.error.get_path().is_disallowed_name()


# --------------------------------------------------------------------------- delete_v2


def test_delete_file(dbx, base):
    up = dbx.files_upload(b"bye", base + "/bye.txt")
    md = dbx.files_delete_v2(base + "/BYE.txt").metadata
    assert isinstance(md, FileMetadata) and md.id == up.id and md.path_lower == up.path_lower
    assert_gone(dbx, base + "/bye.txt")


def test_delete_folder_is_recursive(dbx, base):
    dbx.files_upload(b"1", base + "/tree/x/1.txt")
    dbx.files_upload(b"2", base + "/tree/2.txt")
    md = dbx.files_delete_v2(base + "/tree").metadata
    assert isinstance(md, FolderMetadata)
    for p in ("/tree", "/tree/x", "/tree/x/1.txt", "/tree/2.txt"):
        assert_gone(dbx, base + p)
    assert isinstance(dbx.files_get_metadata(base + "/tree/2.txt", include_deleted=True), DeletedMetadata)


def test_delete_missing_is_path_lookup_not_found(dbx, base):
    with pytest.raises(dbx_exc.ApiError) as ei:
        dbx.files_delete_v2(base + "/never-existed")
    err = ei.value.error  # DeleteError
    assert err.is_path_lookup() and err.get_path_lookup().is_not_found(), err


def test_recreate_after_delete_gets_new_file(dbx, base):
    first = dbx.files_upload(b"one", base + "/phoenix.txt")
    dbx.files_delete_v2(base + "/phoenix.txt")
    second = dbx.files_upload(b"two", base + "/phoenix.txt")
    assert second.rev != first.rev
    assert dbx.files_download(base + "/phoenix.txt")[1].content == b"two"


# --------------------------------------------------------------------------- delete_batch


def test_delete_batch_each_entry_succeeds_or_fails_on_its_own(dbx, base):
    kept = dbx.files_upload(b"a", base + "/batch/a.txt")
    old = dbx.files_upload(b"b", base + "/batch/b.txt")
    dbx.files_upload(b"b, changed", base + "/batch/b.txt", mode=WriteMode.overwrite)
    launch = dbx.files_delete_batch([
        DeleteArg(base + "/batch/A.txt", parent_rev=kept.rev),
        DeleteArg(base + "/batch/b.txt", parent_rev=old.rev),  # changed since: kept
        DeleteArg(base + "/batch/none.txt"),
    ])
    assert launch.is_async_job_id()
    status = dbx.files_delete_batch_check(launch.get_async_job_id())
    while status.is_in_progress():
        time.sleep(0.05)
        status = dbx.files_delete_batch_check(launch.get_async_job_id())
    assert status.is_complete()
    first, second, third = status.get_complete().entries
    assert first.is_success() and first.get_success().metadata.path_lower == kept.path_lower
    assert second.is_failure() and second.get_failure().is_path_write() and second.get_failure().get_path_write().is_conflict()
    assert third.is_failure() and third.get_failure().is_path_lookup() and third.get_failure().get_path_lookup().is_not_found()
    assert_gone(dbx, base + "/batch/a.txt")
    assert dbx.files_get_metadata(base + "/batch/b.txt").size == 10


def test_create_folder_batch_makes_each_folder_or_says_why_not(dbx, base):
    dbx.files_upload(b"a file", base + "/made/taken")
    result = dbx.files_create_folder_batch([
        base + "/made/new",
        base + "/made/deep/er/still",  # parents made too
        base + "/made/taken",  # a file there
        base + "/made/new",  # made by the first entry
    ])
    assert result.is_complete()
    first, deep, taken, again = result.get_complete().entries
    assert first.is_success() and first.get_success().metadata.path_lower == (base + "/made/new").lower()
    assert isinstance(first.get_success().metadata, FolderMetadata)
    assert deep.is_success()
    assert isinstance(dbx.files_get_metadata(base + "/made/deep/er"), FolderMetadata)
    assert taken.is_failure() and taken.get_failure().is_path() and taken.get_failure().get_path().is_conflict()
    assert taken.get_failure().get_path().get_conflict().is_file()
    assert again.is_failure() and again.get_failure().get_path().get_conflict().is_folder()


def test_create_folder_batch_as_a_job(dbx, base):
    launch = dbx.files_create_folder_batch([base + "/job/one", base + "/job/two"], force_async=True)
    assert launch.is_async_job_id()
    status = dbx.files_create_folder_batch_check(launch.get_async_job_id())
    while status.is_in_progress():
        time.sleep(0.05)
        status = dbx.files_create_folder_batch_check(launch.get_async_job_id())
    assert status.is_complete()
    assert [entry.get_success().metadata.name for entry in status.get_complete().entries] == ["one", "two"]


def test_delete_batch_check_of_an_unknown_job(dbx):
    with pytest.raises(dbx_exc.ApiError) as ei:
        dbx.files_delete_batch_check("dbjid:no-such-job")
    assert ei.value.error.is_invalid_async_job_id()


# --------------------------------------------------------------------------- move_v2


def test_move_file_keeps_id(dbx, base):
    up = dbx.files_upload(b"mover", base + "/src/m.txt")
    md = dbx.files_move_v2(base + "/src/m.txt", base + "/dst/Renamed.txt").metadata
    assert isinstance(md, FileMetadata)
    assert md.id == up.id and md.path_display == base + "/dst/Renamed.txt"
    assert md.content_hash == up.content_hash
    assert_gone(dbx, base + "/src/m.txt")
    assert dbx.files_get_metadata(up.id).path_display == base + "/dst/Renamed.txt"


def test_move_folder_moves_children_and_keeps_ids(dbx, base):
    child = dbx.files_upload(b"kid", base + "/old/sub/kid.txt")
    folder = dbx.files_get_metadata(base + "/old")
    md = dbx.files_move_v2(base + "/old", base + "/new").metadata
    assert isinstance(md, FolderMetadata) and md.id == folder.id
    moved = dbx.files_get_metadata(child.id)
    assert moved.path_lower == (base + "/new/sub/kid.txt").lower()
    assert_gone(dbx, base + "/old/sub/kid.txt")


def test_move_case_only_rename(dbx, base):
    up = dbx.files_upload(b"c", base + "/lower.txt")
    md = dbx.files_move_v2(base + "/lower.txt", base + "/LOWER.TXT").metadata
    assert md.name == "LOWER.TXT" and md.id == up.id
    assert dbx.files_get_metadata(base + "/lower.txt").name == "LOWER.TXT"


def test_move_onto_existing_conflicts_or_autorenames(dbx, base):
    dbx.files_upload(b"a", base + "/a.txt")
    dbx.files_upload(b"b", base + "/b.txt")
    with pytest.raises(dbx_exc.ApiError) as ei:
        dbx.files_move_v2(base + "/a.txt", base + "/b.txt")
    err = ei.value.error  # RelocationError
    assert err.is_to() and err.get_to().is_conflict(), err
    md = dbx.files_move_v2(base + "/a.txt", base + "/b.txt", autorename=True).metadata
    assert md.name == "b (1).txt"
    assert dbx.files_download(base + "/b.txt")[1].content == b"b"


def test_move_folder_into_itself(dbx, base):
    dbx.files_create_folder_v2(base + "/loop")
    with pytest.raises(dbx_exc.ApiError) as ei:
        dbx.files_move_v2(base + "/loop", base + "/loop/inner")
    assert ei.value.error.is_cant_move_folder_into_itself(), ei.value.error


def test_move_missing_source(dbx, base):
    with pytest.raises(dbx_exc.ApiError) as ei:
        dbx.files_move_v2(base + "/ghost", base + "/whatever")
    err = ei.value.error
    assert err.is_from_lookup() and err.get_from_lookup().is_not_found(), err


# --------------------------------------------------------------------------- copy_v2


def test_copy_file(dbx, base):
    data = payload(777, 4)
    up = dbx.files_upload(data, base + "/orig.bin")
    md = dbx.files_copy_v2(base + "/orig.bin", base + "/copy/dup.bin").metadata
    assert isinstance(md, FileMetadata)
    assert md.id != up.id and md.content_hash == up.content_hash and md.size == 777
    assert dbx.files_download(base + "/copy/dup.bin")[1].content == data
    assert dbx.files_get_metadata(base + "/orig.bin").id == up.id  # source untouched


def test_copy_folder_recursively(dbx, base):
    dbx.files_upload(b"deep", base + "/tpl/a/b.txt")
    md = dbx.files_copy_v2(base + "/tpl", base + "/inst").metadata
    assert isinstance(md, FolderMetadata)
    assert dbx.files_download(base + "/inst/a/b.txt")[1].content == b"deep"
    assert dbx.files_get_metadata(base + "/inst/a/b.txt").id != dbx.files_get_metadata(base + "/tpl/a/b.txt").id


def test_copy_onto_existing_conflicts(dbx, base):
    dbx.files_upload(b"1", base + "/one.txt")
    dbx.files_upload(b"2", base + "/two.txt")
    with pytest.raises(dbx_exc.ApiError) as ei:
        dbx.files_copy_v2(base + "/one.txt", base + "/two.txt")
    assert ei.value.error.is_to() and ei.value.error.get_to().is_conflict()
    md = dbx.files_copy_v2(base + "/one.txt", base + "/two.txt", autorename=True).metadata
    assert md.name == "two (1).txt"


# --------------------------------------------------------------------------- move_batch_v2


def test_move_batch_each_entry_succeeds_or_fails_on_its_own(dbx, base):
    moved = dbx.files_upload(b"a", base + "/mb/a.txt")
    dbx.files_upload(b"taken", base + "/mb/taken.txt")
    dbx.files_upload(b"d", base + "/mb/dir/inner.txt")
    launch = dbx.files_move_batch_v2([
        RelocationPath(base + "/mb/a.txt", base + "/mb/A moved.txt"),
        RelocationPath(base + "/mb/dir", base + "/mb/elsewhere/dir"),
        RelocationPath(base + "/mb/none.txt", base + "/mb/x.txt"),
        RelocationPath(base + "/mb/A moved.txt", base + "/mb/taken.txt"),
    ])
    assert launch.is_async_job_id() or launch.is_complete()
    if launch.is_async_job_id():
        status = dbx.files_move_batch_check_v2(launch.get_async_job_id())
        while status.is_in_progress():
            time.sleep(0.05)
            status = dbx.files_move_batch_check_v2(launch.get_async_job_id())
        assert status.is_complete()
        entries = status.get_complete().entries
    else:
        entries = launch.get_complete().entries
    first, second, third, fourth = entries
    assert first.is_success() and first.get_success().name == "A moved.txt"
    assert first.get_success().id == moved.id  # a move keeps the id
    assert second.is_success() and second.get_success().path_lower == (base + "/mb/elsewhere/dir").lower()
    assert third.is_failure() and third.get_failure().is_relocation_error()
    assert third.get_failure().get_relocation_error().is_from_lookup()
    assert third.get_failure().get_relocation_error().get_from_lookup().is_not_found()
    assert fourth.is_failure() and fourth.get_failure().get_relocation_error().is_to()
    assert fourth.get_failure().get_relocation_error().get_to().is_conflict()
    assert_gone(dbx, base + "/mb/a.txt")
    assert dbx.files_download(base + "/mb/elsewhere/dir/inner.txt")[1].content == b"d"
