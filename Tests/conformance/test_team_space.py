"""A team member's account (--team): root_info, Dropbox-API-Path-Root (home, root,
namespace_id), the read-only top of the team space, path-root errors, and a team-wide
token acting for the member through Dropbox-API-Select-User."""

import pytest

import dropbox
from dropbox import exceptions as dbx_exc
from dropbox.common import PathRoot
from dropbox.files import FolderMetadata, WriteMode

ROOT_NS, HOME_NS, SHARED_NS = "3000", "1000", "4000"
MEMBER = "dbmid:AAHemmaUlatorEmulatedMember0001"


@pytest.fixture
def team(emulator_factory):
    return emulator_factory(args=["--team", "--seed", "demo", "--team-token", "team-token"])


def names(dbx, path=""):
    return sorted(e.name for e in dbx.files_list_folder(path).entries)


def test_root_info_names_the_team_space(team):
    info = team.client().users_get_current_account().root_info
    assert isinstance(info, dropbox.common.TeamRootInfo)
    assert info.root_namespace_id == ROOT_NS and info.home_namespace_id == HOME_NS
    assert info.home_path == "/Emma Ulator"


def test_without_a_header_paths_are_the_members_home(team):
    dbx = team.client()
    assert "Documents" in names(dbx)  # the demo seed went into the home folder
    md = dbx.files_upload(b"mine", "/note.txt")
    assert md.path_display == "/note.txt"
    home = dbx.with_path_root(PathRoot.home)
    assert home.files_get_metadata("/note.txt").id == md.id


def test_the_root_shows_the_team_folders_and_the_home(team):
    root = team.client().with_path_root(PathRoot.root(ROOT_NS))
    assert names(root) == ["Emma Ulator", "Team Shared"]
    assert all(isinstance(e, FolderMetadata) for e in root.files_list_folder("").entries)
    assert root.files_get_metadata("/Emma Ulator/Documents/notes.md").path_display == "/Emma Ulator/Documents/notes.md"


def test_writes_into_a_shared_folder_land_in_its_namespace(team):
    root = team.client().with_path_root(PathRoot.root(ROOT_NS))
    root.files_upload(b"for everyone", "/Team Shared/plan.txt")
    shared = team.client().with_path_root(PathRoot.namespace_id(SHARED_NS))
    md = shared.files_get_metadata("/plan.txt")
    assert md.path_display == "/plan.txt"
    _, body = shared.files_download("/plan.txt")
    assert body.content == b"for everyone"
    listing = shared.files_list_folder("", recursive=True)
    assert [e.path_display for e in listing.entries] == ["/plan.txt"]
    # The member's home does not hold it.
    with pytest.raises(dbx_exc.ApiError):
        team.client().files_get_metadata("/plan.txt")


def test_nothing_is_written_at_the_top_of_the_team_space(team):
    root = team.client().with_path_root(PathRoot.root(ROOT_NS))
    with pytest.raises(dbx_exc.ApiError) as ei:
        root.files_create_folder_v2("/My Own Folder")
    assert ei.value.error.get_path().is_no_write_permission()
    with pytest.raises(dbx_exc.ApiError) as ei:
        root.files_upload(b"x", "/loose.txt", mode=WriteMode.add)
    assert ei.value.error.get_path().reason.is_no_write_permission()
    with pytest.raises(dbx_exc.ApiError) as ei:
        root.files_delete_v2("/Team Shared")
    assert ei.value.error.is_path_write()
    assert names(root) == ["Emma Ulator", "Team Shared"]


def test_a_root_or_namespace_the_account_cannot_use_is_refused(team):
    with pytest.raises(dbx_exc.PathRootError) as ei:
        team.client().with_path_root(PathRoot.root("999")).files_list_folder("")
    assert ei.value.error.is_invalid_root()
    assert ei.value.error.get_invalid_root().root_namespace_id == ROOT_NS
    with pytest.raises(dbx_exc.PathRootError) as ei:
        team.client().with_path_root(PathRoot.namespace_id("12345")).files_list_folder("")
    assert ei.value.error.is_no_permission()


def test_cursors_follow_their_root(team):
    shared = team.client().with_path_root(PathRoot.namespace_id(SHARED_NS))
    cursor = shared.files_list_folder_get_latest_cursor("", recursive=True).cursor
    team.client().files_upload(b"home only", "/home-only.txt")
    team.client().with_path_root(PathRoot.root(ROOT_NS)).files_upload(b"s", "/Team Shared/new.txt")
    changes = shared.files_list_folder_continue(cursor).entries
    assert [e.path_display for e in changes] == ["/new.txt"]


def test_a_team_token_acts_for_the_member_it_names(team):
    member = dropbox.DropboxTeam(session=team.session(), oauth2_access_token="team-token",
                                 max_retries_on_error=0).as_user(MEMBER)
    assert member.users_get_current_account().email.endswith("@dropboxfs-emulator.invalid")
    assert "Documents" in names(member)
    with pytest.raises(dbx_exc.BadInputError) as ei:
        team.client(token="team-token").files_list_folder("")
    assert "Dropbox-API-Select-User" in str(ei.value)


def test_an_individual_account_takes_its_own_root_only(dbx):
    info = dbx.users_get_current_account().root_info
    assert isinstance(info, dropbox.common.UserRootInfo)
    assert info.root_namespace_id == info.home_namespace_id == HOME_NS
    assert dbx.with_path_root(PathRoot.root(HOME_NS)).files_list_folder("") is not None
    with pytest.raises(dbx_exc.PathRootError):
        dbx.with_path_root(PathRoot.root(ROOT_NS)).files_list_folder("")
