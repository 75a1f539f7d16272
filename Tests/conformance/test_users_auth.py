"""users/*, auth/token/revoke, bearer-token errors and the OAuth 2 (PKCE) flow."""

import html
import re
from datetime import datetime, timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
import requests

import dropbox
from dropbox import exceptions as dbx_exc
from dropbox.oauth import DropboxOAuth2Flow, DropboxOAuth2FlowNoRedirect

from dbxemu import HTTP_TIMEOUT, payload

APP_KEY = "conformance-app-key"
TWO_TIB = 2 * 1024**4


def authorize_no_redirect(emu, app_key=APP_KEY):
    """Run DropboxOAuth2FlowNoRedirect against the emulator; return (flow, code)."""
    flow = DropboxOAuth2FlowNoRedirect(app_key, use_pkce=True, token_access_type="offline", timeout=HTTP_TIMEOUT)
    flow.requests_session = emu.session()
    url = flow.start()
    r = flow.requests_session.get(url, timeout=HTTP_TIMEOUT)
    assert r.status_code == 200, (r.status_code, r.text[:500])
    assert r.headers.get("Content-Type", "").startswith("text/html")
    m = re.search(r'<code id="auth-code">([^<]+)</code>', r.text)
    assert m, "authorize page lacks <code id=\"auth-code\">: %r" % r.text[:500]
    return flow, html.unescape(m.group(1)).strip()


def oauth_login(emu, app_key=APP_KEY):
    flow, code = authorize_no_redirect(emu, app_key)
    return flow.finish(code)


def account_id_of(emu, token):
    """account_id via a raw call, so OAuth tests don't also depend on the
    FullAccount validator (covered by test_get_current_account_is_full_account)."""
    r = emu.rpc("users/get_current_account", None, token=token)
    assert r.status_code == 200, (r.status_code, r.text)
    return r.json()["account_id"]


# --------------------------------------------------------------------------- users


def test_get_current_account_is_full_account(dbx):
    acct = dbx.users_get_current_account()  # SDK validates FullAccount
    assert isinstance(acct, dropbox.users.FullAccount)
    assert len(acct.account_id) == 40 and acct.account_id.startswith("dbid:")
    assert "@" in acct.email
    assert acct.name.display_name
    assert acct.root_info.root_namespace_id and acct.root_info.home_namespace_id


def test_space_usage_default_allocation_is_2_tib(dbx):
    usage = dbx.users_get_space_usage()
    assert usage.allocation.is_individual()
    assert usage.allocation.get_individual().allocated == TWO_TIB
    assert 0 <= usage.used <= TWO_TIB


def test_space_usage_counts_uploaded_bytes(dbx, base):
    before = dbx.users_get_space_usage().used
    dbx.files_upload(payload(12345, 1), base + "/used.bin")
    after = dbx.users_get_space_usage().used
    assert after - before == 12345


def test_quota_allocation_and_insufficient_space(emulator_factory):
    emu = emulator_factory(["--quota", "10000"])
    dbx = emu.client()
    usage = dbx.users_get_space_usage()
    assert usage.allocation.get_individual().allocated == 10000
    dbx.files_upload(payload(6000), "/fits.bin")
    with pytest.raises(dbx_exc.ApiError) as ei:
        dbx.files_upload(payload(6000, 2), "/too-much.bin")
    err = ei.value.error  # UploadError
    assert err.is_path() and err.get_path().reason.is_insufficient_space(), err
    # Nothing was written.
    with pytest.raises(dbx_exc.ApiError):
        dbx.files_get_metadata("/too-much.bin")


# --------------------------------------------------------------------------- bearer token errors


def test_invalid_token_is_401_invalid_access_token(emu):
    bad = emu.client(token="definitely-not-a-token")
    with pytest.raises(dbx_exc.AuthError) as ei:
        bad.users_get_current_account()
    assert ei.value.error.is_invalid_access_token()
    r = emu.rpc("users/get_current_account", None, token="definitely-not-a-token")
    assert r.status_code == 401
    assert r.headers["Content-Type"].startswith("application/json")
    body = r.json()
    assert body["error"][".tag"] == "invalid_access_token"
    assert body["error_summary"].startswith("invalid_access_token")


def test_missing_authorization_header_is_400_plain_text(emu):
    # Real Dropbox: 400 text/plain 'Must provide HTTP header "Authorization" ...'
    # (e.g. andreafabrizi/Dropbox-Uploader#323, dropbox/SwiftyDropbox#20).
    r = emu.rpc("users/get_current_account", None, auth=False)
    assert r.status_code == 400
    assert r.headers["Content-Type"].startswith("text/plain")
    assert "authorization" in r.text.lower()


def test_malformed_authorization_header_is_400(emu):
    # 'Invalid authorization value in HTTP header "Authorization": "Bearer"'
    r = emu.rpc("users/get_space_usage", None, auth=False, headers={"Authorization": "Bearer"})
    assert r.status_code == 400
    assert r.headers["Content-Type"].startswith("text/plain")


# --------------------------------------------------------------------------- OAuth 2 + PKCE


def test_oauth_pkce_no_redirect_flow_issues_working_tokens(emu):
    res = oauth_login(emu)
    assert res.access_token and res.refresh_token
    assert res.expires_at is not None and res.expires_at > datetime.utcnow()
    assert res.account_id and res.user_id
    emu.client(token=res.access_token).users_get_space_usage()
    assert account_id_of(emu, res.access_token) == res.account_id


def test_oauth_redirect_flow_returns_code_and_state(emu):
    session = {}
    redirect_uri = "http://localhost:53682/callback"
    flow = DropboxOAuth2Flow(
        APP_KEY, redirect_uri, session, "dropbox-csrf", use_pkce=True,
        token_access_type="offline", timeout=HTTP_TIMEOUT,
    )
    flow.requests_session = emu.session()
    url = flow.start(url_state="opaque-state")
    sent_state = parse_qs(urlsplit(url).query)["state"][0]
    r = flow.requests_session.get(url, allow_redirects=False, timeout=HTTP_TIMEOUT)
    assert r.status_code == 302, (r.status_code, r.text[:300])
    loc = r.headers["Location"]
    assert loc.startswith(redirect_uri + "?")
    qs = {k: v[0] for k, v in parse_qs(urlsplit(loc).query).items()}
    assert qs["state"] == sent_state and qs["code"]
    result = flow.finish(qs)
    assert result.url_state == "opaque-state"
    assert result.refresh_token
    emu.client(token=result.access_token).users_get_space_usage()
    assert account_id_of(emu, result.access_token) == result.account_id


def test_oauth_authorization_code_is_single_use(emu):
    flow, code = authorize_no_redirect(emu)
    flow.finish(code)
    with pytest.raises(requests.HTTPError) as ei:
        flow.finish(code)
    assert ei.value.response.status_code == 400
    assert ei.value.response.json()["error"] == "invalid_grant"


def test_oauth_wrong_code_verifier_is_invalid_grant(emu):
    flow, code = authorize_no_redirect(emu)
    r = emu.session().post(
        "https://api.dropbox-emulator.test/oauth2/token",
        data={"grant_type": "authorization_code", "code": code, "client_id": APP_KEY,
              "code_verifier": "x" * 64},
        timeout=HTTP_TIMEOUT,
    )
    assert r.status_code == 400
    assert r.json()["error"] == "invalid_grant"


def test_refresh_token_grant_via_sdk(emu):
    res = oauth_login(emu)
    r = emu.session().post(
        "https://api.dropbox-emulator.test/oauth2/token",
        data={"grant_type": "refresh_token", "refresh_token": res.refresh_token, "client_id": APP_KEY},
        timeout=HTTP_TIMEOUT,
    )
    assert r.status_code == 200, r.text
    tok = r.json()
    assert tok["token_type"].lower() == "bearer"
    assert int(tok["expires_in"]) > 0 and tok["access_token"]
    # The SDK itself: no access token, only a refresh token -> it refreshes first.
    dbx = emu.client(oauth2_refresh_token=res.refresh_token, app_key=APP_KEY)
    dbx.users_get_space_usage()
    assert dbx._oauth2_access_token  # obtained through /oauth2/token
    assert account_id_of(emu, dbx._oauth2_access_token) == res.account_id


def test_bogus_refresh_token_is_rejected(emu):
    dbx = emu.client(oauth2_refresh_token="not-a-refresh-token", app_key=APP_KEY)
    # /oauth2/token answers 400 {"error": "invalid_grant"}, which the SDK maps
    # to AuthError(invalid_access_token).
    with pytest.raises(dbx_exc.AuthError) as ei:
        dbx.users_get_current_account()
    assert ei.value.error.is_invalid_access_token()


def test_token_revoke_invalidates_token(emu):
    res = oauth_login(emu)
    dbx = emu.client(token=res.access_token)
    dbx.users_get_space_usage()
    assert dbx.auth_token_revoke() is None
    with pytest.raises(dbx_exc.AuthError) as ei:
        emu.client(token=res.access_token).users_get_space_usage()
    assert ei.value.error.is_invalid_access_token()
    # Revoking one token must not affect the long-lived one.
    emu.client().users_get_space_usage()


def test_short_lived_token_expires_and_sdk_refreshes(emulator_factory):
    # Expired by the emulator's control, not by waiting out a 2 s lifetime: a loaded
    # machine can take longer than that between the login and the first call.
    emu = emulator_factory(["--access-token-lifetime", "600"])
    res = oauth_login(emu)
    assert res.expires_at <= datetime.utcnow() + timedelta(seconds=601)
    raw = emu.client(token=res.access_token)
    raw.users_get_space_usage()  # valid while fresh
    emu.expire_tokens()
    with pytest.raises(dbx_exc.AuthError) as ei:
        raw.users_get_space_usage()
    assert ei.value.error.is_expired_access_token(), ei.value.error
    r = emu.rpc("users/get_current_account", None, token=res.access_token)
    assert r.status_code == 401 and r.json()["error"][".tag"] == "expired_access_token"

    # SDK told the token is still valid: it gets 401 expired_access_token,
    # refreshes with the refresh token, and retries transparently.
    dbx = emu.client(
        oauth2_access_token=res.access_token,
        oauth2_refresh_token=res.refresh_token,
        oauth2_access_token_expiration=datetime.utcnow() + timedelta(hours=1),
        app_key=APP_KEY,
    )
    dbx.users_get_space_usage()
    assert dbx._oauth2_access_token != res.access_token
    # The long-lived --token is unaffected by the OAuth token lifetime.
    emu.client().users_get_space_usage()
