"""files/list_revisions, files/restore, files/search_v2 (and continue_v2),
sharing/create_shared_link_with_settings, sharing/list_shared_links,
sharing/revoke_shared_link — read back through the official SDK, whose stone
validators check every field Dropbox promises."""

import datetime

import pytest

from dropbox import exceptions as dbx_exc
from dropbox.files import (FileMetadata, FileStatus, ListRevisionsMode, SearchOptions, WriteMode)
from dropbox.sharing import FileLinkMetadata, FolderLinkMetadata, SharedLinkSettings


def write(dbx, path, data):
    return dbx.files_upload(data, path, mode=WriteMode.overwrite)


# --------------------------------------------------------------------------- list_revisions


def test_revisions_newest_first_with_their_bytes(dbx, base):
    path = base + "/report.txt"
    revs = [write(dbx, path, b"version %d" % i).rev for i in range(3)]
    res = dbx.files_list_revisions(path)
    assert not res.is_deleted and not res.has_more
    assert [e.rev for e in res.entries] == list(reversed(revs))
    assert all(isinstance(e, FileMetadata) and e.path_display == path for e in res.entries)
    for i, rev in enumerate(revs):
        _, body = dbx.files_download("rev:" + rev)
        assert body.content == b"version %d" % i


def test_revisions_limit_says_has_more(dbx, base):
    path = base + "/f"
    for i in range(4):
        write(dbx, path, b"x" * (i + 1))
    res = dbx.files_list_revisions(path, limit=2)
    assert len(res.entries) == 2 and res.has_more
    assert [e.size for e in res.entries] == [4, 3]


def test_revisions_by_id_follow_a_move(dbx, base):
    md = write(dbx, base + "/a", b"one")
    write(dbx, base + "/a", b"two")
    dbx.files_move_v2(base + "/a", base + "/b")
    res = dbx.files_list_revisions(md.id, mode=ListRevisionsMode.id)
    assert [e.size for e in res.entries] == [3, 3]
    assert all(e.path_display == base + "/b" for e in res.entries)


def test_revisions_of_a_deleted_file(dbx, base):
    path = base + "/gone.txt"
    rev = write(dbx, path, b"keep me").rev
    dbx.files_delete_v2(path)
    res = dbx.files_list_revisions(path)
    assert res.is_deleted
    assert [e.rev for e in res.entries] == [rev]


def test_revisions_errors(dbx, base):
    dbx.files_create_folder_v2(base + "/folder")
    with pytest.raises(dbx_exc.ApiError) as ei:
        dbx.files_list_revisions(base + "/folder")
    assert ei.value.error.get_path().is_not_file()
    with pytest.raises(dbx_exc.ApiError) as ei:
        dbx.files_list_revisions(base + "/nothing")
    assert ei.value.error.get_path().is_not_found()


# --------------------------------------------------------------------------- restore


def test_restore_an_older_revision(dbx, base):
    path = base + "/doc.txt"
    first = write(dbx, path, b"first").rev
    write(dbx, path, b"second")
    md = dbx.files_restore(path, first)
    assert isinstance(md, FileMetadata) and md.size == 5 and md.rev != first
    _, body = dbx.files_download(path)
    assert body.content == b"first"
    assert len(dbx.files_list_revisions(path).entries) == 3


def test_restore_brings_a_deleted_file_back(dbx, base):
    path = base + "/deleted.txt"
    md = write(dbx, path, b"back again")
    dbx.files_delete_v2(path)
    restored = dbx.files_restore(path, md.rev)
    assert restored.id == md.id
    _, body = dbx.files_download(path)
    assert body.content == b"back again"


def test_restore_errors(dbx, base):
    path = base + "/e.txt"
    write(dbx, path, b"e")
    with pytest.raises(dbx_exc.ApiError) as ei:
        dbx.files_restore(path, "0123456789abcdef")
    assert ei.value.error.is_invalid_revision()
    dbx.files_create_folder_v2(base + "/dir")
    rev = dbx.files_list_revisions(path).entries[0].rev
    with pytest.raises(dbx_exc.ApiError) as ei:
        dbx.files_restore(base + "/dir", rev)
    assert ei.value.error.is_path_write() and ei.value.error.get_path_write().is_conflict()


# --------------------------------------------------------------------------- search_v2


def test_search_finds_by_name_words(dbx, base):
    write(dbx, base + "/Quarterly Report 2026.pdf", b"q")
    write(dbx, base + "/sub/report-notes.txt", b"n")
    write(dbx, base + "/unrelated.txt", b"u")
    res = dbx.files_search_v2("report", options=SearchOptions(path=base))
    names = sorted(m.metadata.get_metadata().name for m in res.matches)
    assert names == ["Quarterly Report 2026.pdf", "report-notes.txt"]
    res = dbx.files_search_v2("quarterly 2026", options=SearchOptions(path=base))
    assert [m.metadata.get_metadata().path_display for m in res.matches] == [base + "/Quarterly Report 2026.pdf"]
    res = dbx.files_search_v2("report", options=SearchOptions(path=base, file_extensions=["txt"]))
    assert [m.metadata.get_metadata().name for m in res.matches] == ["report-notes.txt"]


def test_search_pages_with_continue(dbx, base):
    for i in range(5):
        write(dbx, base + "/paged-%d" % i, b"p")
    res = dbx.files_search_v2("paged", options=SearchOptions(path=base, max_results=2))
    seen = [m.metadata.get_metadata().name for m in res.matches]
    while res.has_more:
        res = dbx.files_search_continue_v2(res.cursor)
        seen += [m.metadata.get_metadata().name for m in res.matches]
    assert sorted(seen) == ["paged-%d" % i for i in range(5)]


def test_search_deleted_files(dbx, base):
    write(dbx, base + "/erased.txt", b"e")
    dbx.files_delete_v2(base + "/erased.txt")
    res = dbx.files_search_v2("erased", options=SearchOptions(path=base))
    assert res.matches == []
    res = dbx.files_search_v2("erased", options=SearchOptions(path=base, file_status=FileStatus.deleted))
    assert [m.metadata.get_metadata().name for m in res.matches] == ["erased.txt"]


def test_search_in_a_missing_folder(dbx, base):
    with pytest.raises(dbx_exc.ApiError) as ei:
        dbx.files_search_v2("x", options=SearchOptions(path=base + "/missing"))
    assert ei.value.error.get_path().is_not_found()


# --------------------------------------------------------------------------- shared links


def test_shared_link_made_once(dbx, base):
    path = base + "/shared.txt"
    write(dbx, path, b"look")
    link = dbx.sharing_create_shared_link_with_settings(path)
    assert isinstance(link, FileLinkMetadata) and link.url.startswith("https://")
    assert link.name == "shared.txt" and link.size == 4 and link.link_permissions.can_revoke
    with pytest.raises(dbx_exc.ApiError) as ei:
        dbx.sharing_create_shared_link_with_settings(path)
    assert ei.value.error.is_shared_link_already_exists()
    assert ei.value.error.get_shared_link_already_exists().get_metadata().url == link.url
    listed = dbx.sharing_list_shared_links(path=path, direct_only=True).links
    assert [l.url for l in listed] == [link.url]


def test_shared_link_of_a_folder_covers_what_is_inside(dbx, base):
    write(dbx, base + "/album/photo.jpg", b"jpg")
    link = dbx.sharing_create_shared_link_with_settings(base + "/album")
    assert isinstance(link, FolderLinkMetadata)
    assert [l.url for l in dbx.sharing_list_shared_links(path=base + "/album/photo.jpg").links] == [link.url]
    assert dbx.sharing_list_shared_links(path=base + "/album/photo.jpg", direct_only=True).links == []


def test_shared_link_follows_a_move_and_dies_with_the_file(dbx, base):
    write(dbx, base + "/m.txt", b"m")
    link = dbx.sharing_create_shared_link_with_settings(base + "/m.txt")
    dbx.files_move_v2(base + "/m.txt", base + "/n.txt")
    assert [l.path_lower for l in dbx.sharing_list_shared_links(path=base + "/n.txt").links] == [(base + "/n.txt").lower()]
    dbx.files_delete_v2(base + "/n.txt")
    assert link.url not in [l.url for l in dbx.sharing_list_shared_links().links]


def test_shared_link_revoked(dbx, base):
    write(dbx, base + "/r.txt", b"r")
    link = dbx.sharing_create_shared_link_with_settings(base + "/r.txt")
    dbx.sharing_revoke_shared_link(link.url)
    assert dbx.sharing_list_shared_links(path=base + "/r.txt").links == []
    with pytest.raises(dbx_exc.ApiError) as ei:
        dbx.sharing_revoke_shared_link(link.url)
    assert ei.value.error.is_shared_link_not_found()


def test_shared_link_expiry(dbx, base):
    write(dbx, base + "/x.txt", b"x")
    past = datetime.datetime(2000, 1, 1)
    with pytest.raises(dbx_exc.ApiError) as ei:
        dbx.sharing_create_shared_link_with_settings(base + "/x.txt", SharedLinkSettings(expires=past))
    assert ei.value.error.is_settings_error()
    future = datetime.datetime(2100, 1, 1)
    link = dbx.sharing_create_shared_link_with_settings(base + "/x.txt", SharedLinkSettings(expires=future))
    assert link.expires == future


def test_shared_link_of_nothing(dbx, base):
    with pytest.raises(dbx_exc.ApiError) as ei:
        dbx.sharing_create_shared_link_with_settings(base + "/nothing")
    assert ei.value.error.get_path().is_not_found()
