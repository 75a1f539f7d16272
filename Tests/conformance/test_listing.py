"""files/list_folder, /continue, /get_latest_cursor, /longpoll; persistence."""

import threading

import pytest

from dropbox import exceptions as dbx_exc
from dropbox.files import DeletedMetadata, FileMetadata, FolderMetadata

from dbxemu import dropbox_content_hash, payload, wait_until

LONGPOLL_CAP = 4  # conftest starts the module emulator with --longpoll-max-wait 4


def drain(dbx, result):
    entries = list(result.entries)
    pages = 1
    while result.has_more:
        result = dbx.files_list_folder_continue(result.cursor)
        entries += result.entries
        pages += 1
        assert pages < 100, "runaway pagination"
    return entries, result.cursor, pages


def test_list_root_contains_new_folder(dbx, base):
    dbx.files_create_folder_v2(base)
    res = dbx.files_list_folder("")
    entries, _, _ = drain(dbx, res)
    match = [e for e in entries if e.path_lower == base.lower()]
    assert len(match) == 1 and isinstance(match[0], FolderMetadata)


def test_list_folder_direct_children_only(dbx, base):
    dbx.files_upload(b"1", base + "/a.txt")
    dbx.files_upload(b"2", base + "/sub/b.txt")
    entries, _, _ = drain(dbx, dbx.files_list_folder(base))
    got = {(type(e).__name__, e.path_lower) for e in entries}
    assert got == {("FileMetadata", (base + "/a.txt").lower()), ("FolderMetadata", (base + "/sub").lower())}


def test_list_folder_recursive_parents_before_children(dbx, base):
    paths = [base + "/x/y/z/deep.txt", base + "/x/top.txt", base + "/w.txt"]
    for i, p in enumerate(paths):
        dbx.files_upload(payload(10, i), p)
    entries, _, _ = drain(dbx, dbx.files_list_folder(base, recursive=True))
    lowers = [e.path_lower for e in entries]
    expected = {p.lower() for p in paths} | {(base + s).lower() for s in ("/x", "/x/y", "/x/y/z")}
    # The listed folder itself may be included (Dropbox does include it for recursive listings).
    assert expected <= set(lowers) <= expected | {base.lower()}
    assert len(lowers) == len(set(lowers))
    pos = {p: i for i, p in enumerate(lowers)}
    for p in lowers:
        parent = p.rsplit("/", 1)[0]
        if parent in pos:
            assert pos[parent] < pos[p], "parent %s listed after child %s" % (parent, p)


def test_list_folder_pagination_with_limit(dbx, base):
    names = {"f%02d.txt" % i for i in range(7)}
    for n in names:
        dbx.files_upload(n.encode(), base + "/" + n)
    first = dbx.files_list_folder(base, limit=2)
    assert first.has_more is True
    assert 1 <= len(first.entries) <= 3  # "approximate" limit
    entries, _, pages = drain(dbx, first)
    assert pages >= 3
    assert sorted(e.name for e in entries) == sorted(names)


def test_list_folder_on_file_is_not_folder(dbx, base):
    dbx.files_upload(b"f", base + "/file.txt")
    with pytest.raises(dbx_exc.ApiError) as ei:
        dbx.files_list_folder(base + "/file.txt")
    err = ei.value.error  # ListFolderError
    assert err.is_path() and err.get_path().is_not_folder(), err


def test_list_folder_missing_is_not_found(dbx, base):
    with pytest.raises(dbx_exc.ApiError) as ei:
        dbx.files_list_folder(base + "/nope")
    assert ei.value.error.get_path().is_not_found()


def test_continue_reports_adds_and_deletes(dbx, base):
    dbx.files_upload(b"keep", base + "/keep.txt")
    dbx.files_upload(b"drop", base + "/drop.txt")
    _, cursor, _ = drain(dbx, dbx.files_list_folder(base))
    res = dbx.files_list_folder_continue(cursor)
    assert res.entries == [] and res.has_more is False  # nothing changed yet
    dbx.files_upload(b"new", base + "/new.txt")
    dbx.files_delete_v2(base + "/drop.txt")
    entries, cursor2, _ = drain(dbx, dbx.files_list_folder_continue(res.cursor))
    by_path = {e.path_lower: e for e in entries}
    assert isinstance(by_path.get((base + "/new.txt").lower()), FileMetadata)
    assert isinstance(by_path.get((base + "/drop.txt").lower()), DeletedMetadata)
    assert (base + "/keep.txt").lower() not in by_path
    again = dbx.files_list_folder_continue(cursor2)
    assert again.entries == []


def test_get_latest_cursor_sees_only_later_changes(dbx, base):
    dbx.files_upload(b"old", base + "/old.txt")
    latest = dbx.files_list_folder_get_latest_cursor(base)
    assert latest.cursor
    dbx.files_upload(b"later", base + "/later.txt")
    entries, _, _ = drain(dbx, dbx.files_list_folder_continue(latest.cursor))
    assert [e.path_lower for e in entries] == [(base + "/later.txt").lower()]


def test_list_folder_include_deleted(dbx, base):
    dbx.files_upload(b"a", base + "/alive.txt")
    dbx.files_upload(b"d", base + "/dead.txt")
    dbx.files_delete_v2(base + "/dead.txt")
    plain, _, _ = drain(dbx, dbx.files_list_folder(base))
    assert [e.name for e in plain] == ["alive.txt"]
    with_deleted, _, _ = drain(dbx, dbx.files_list_folder(base, include_deleted=True))
    kinds = {e.name: type(e) for e in with_deleted}
    assert kinds == {"alive.txt": FileMetadata, "dead.txt": DeletedMetadata}


def test_continue_with_garbage_cursor_is_rejected(dbx):
    # Dropbox answers a malformed cursor with 400 (bad input) or 409 reset.
    with pytest.raises((dbx_exc.BadInputError, dbx_exc.ApiError)) as ei:
        dbx.files_list_folder_continue("this-is-not-a-cursor")
    if isinstance(ei.value, dbx_exc.ApiError):
        assert ei.value.error.is_reset() or ei.value.error.is_path()


# --------------------------------------------------------------------------- longpoll


def _longpoll_in_thread(dbx, cursor, timeout=30, emu=None):
    """Starts a longpoll in a thread; with `emu`, returns once the emulator has received it."""
    box = {}
    before = _longpolls_seen(emu) if emu else 0

    def run():
        try:
            box["result"] = dbx.files_list_folder_longpoll(cursor, timeout=timeout)
        except Exception as e:  # surfaced by the caller
            box["error"] = e

    th = threading.Thread(target=run, daemon=True)
    th.start()
    if emu:
        wait_until(lambda: _longpolls_seen(emu) > before, 10, what="the longpoll to reach the emulator")
    return th, box


def _longpolls_seen(emu):
    route = emu.stats().get("routes", {}).get("files/list_folder/longpoll", {})
    return route.get("requests", 0)


def test_longpoll_without_changes_returns_false(dbx, base):
    dbx.files_create_folder_v2(base)
    cursor = dbx.files_list_folder_get_latest_cursor(base).cursor
    # Returning at all (the SDK's socket timeout is 120 s) shows the emulator's cap holds;
    # a poll that answered "no changes" without waiting would fail the wake-up tests below.
    res = dbx.files_list_folder_longpoll(cursor, timeout=30)
    assert res.changes is False
    if res.backoff is not None:
        assert res.backoff >= 0


def test_longpoll_wakes_promptly_on_change(emu, dbx, base):
    dbx.files_create_folder_v2(base)
    cursor = dbx.files_list_folder_get_latest_cursor(base).cursor
    th, box = _longpoll_in_thread(dbx, cursor, emu=emu)
    assert th.is_alive(), box
    dbx.files_upload(b"ping", base + "/ping.txt")
    th.join(timeout=LONGPOLL_CAP + 15)
    assert not th.is_alive(), "longpoll did not return"
    assert "error" not in box, box.get("error")
    # A poll that ran out at the cap answers changes=False: True means the change woke it.
    assert box["result"].changes is True


def test_longpoll_returns_immediately_if_already_changed(dbx, base):
    dbx.files_create_folder_v2(base)
    cursor = dbx.files_list_folder_get_latest_cursor(base).cursor
    dbx.files_upload(b"x", base + "/x.txt")
    res = dbx.files_list_folder_longpoll(cursor, timeout=30)
    assert res.changes is True  # not the cap's changes=False


def test_longpoll_ignores_changes_outside_cursor_path(emu, dbx, base):
    dbx.files_create_folder_v2(base + "/watched")
    dbx.files_create_folder_v2(base + "/other")
    cursor = dbx.files_list_folder_get_latest_cursor(base + "/watched").cursor
    th, box = _longpoll_in_thread(dbx, cursor, emu=emu)
    dbx.files_upload(b"elsewhere", base + "/other/f.txt")
    th.join(timeout=LONGPOLL_CAP + 15)
    assert not th.is_alive()
    assert "error" not in box, box.get("error")
    assert box["result"].changes is False


def test_longpoll_needs_no_authorization(emu, dbx, base):
    dbx.files_create_folder_v2(base)
    cursor = dbx.files_list_folder_get_latest_cursor(base).cursor
    dbx.files_upload(b"y", base + "/y.txt")
    r = emu.rpc("files/list_folder/longpoll", {"cursor": cursor, "timeout": 30}, auth=False, timeout=LONGPOLL_CAP + 20)
    assert r.status_code == 200, r.text
    assert r.json()["changes"] is True
    # The SDK routes longpoll to the notify host (no Authorization header).
    dbx.files_list_folder_longpoll(cursor, timeout=30)
    assert ("notify.dropbox-emulator.test", "/2/files/list_folder/longpoll") in dbx._session.adapter.seen


def test_longpoll_rejects_timeout_out_of_range(emu, dbx, base):
    dbx.files_create_folder_v2(base)
    cursor = dbx.files_list_folder_get_latest_cursor(base).cursor
    r = emu.rpc("files/list_folder/longpoll", {"cursor": cursor, "timeout": 5}, auth=False)
    assert r.status_code == 400  # ListFolderLongpollArg.timeout: min 30, max 480


# --------------------------------------------------------------------------- persistence / seed


def test_state_and_cursors_survive_restart(emulator_factory, tmp_path):
    emu = emulator_factory(data_dir=tmp_path / "persist")
    dbx = emu.client()
    data = payload(3000, 3)
    up = dbx.files_upload(data, "/Persist/Kept.bin")
    cursor = dbx.files_list_folder_get_latest_cursor("/Persist").cursor
    emu.restart()
    dbx = emu.client()
    md = dbx.files_get_metadata("/persist/kept.bin")
    assert (md.id, md.rev, md.content_hash, md.path_display) == (up.id, up.rev, up.content_hash, up.path_display)
    _, resp = dbx.files_download(up.id)
    assert resp.content == data
    res = dbx.files_list_folder_continue(cursor)  # old cursor still valid
    assert res.entries == []
    dbx.files_upload(b"after restart", "/Persist/new.txt")
    entries, _, _ = drain(dbx, dbx.files_list_folder_continue(res.cursor))
    assert [e.path_lower for e in entries] == ["/persist/new.txt"]


def test_seed_demo_populates_files(emulator_factory):
    emu = emulator_factory(["--seed", "demo"])
    dbx = emu.client()
    entries, _, _ = drain(dbx, dbx.files_list_folder("", recursive=True))
    files = [e for e in entries if isinstance(e, FileMetadata)]
    assert files, "seed demo produced no files"
    f = min(files, key=lambda e: e.size)
    md, resp = dbx.files_download(f.path_lower)
    assert len(resp.content) == f.size == md.size
    assert dropbox_content_hash(resp.content) == f.content_hash
