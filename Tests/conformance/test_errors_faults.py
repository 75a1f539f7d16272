"""Generic HTTP error contract (400/409 shapes, request ids, header encoding)
and the emulator's fault injection and stats endpoints."""

import json

import pytest
import requests

from dropbox import exceptions as dbx_exc

from dbxemu import payload


@pytest.fixture(autouse=True)
def _clean_faults(emu):
    emu.clear_faults()
    yield
    emu.clear_faults()


# --------------------------------------------------------------------------- error shapes


def test_route_error_is_409_with_error_summary(emu, base):
    r = emu.rpc("files/get_metadata", {"path": base + "/missing"})
    assert r.status_code == 409
    assert r.headers["Content-Type"].startswith("application/json")
    body = r.json()
    assert body["error_summary"].startswith("path/not_found/")
    assert body["error"] == {".tag": "path", "path": {".tag": "not_found"}}


def test_request_id_header_on_every_kind_of_response(emu, base):
    responses = {
        "200": emu.rpc("users/get_current_account", None),
        "400": emu.rpc("files/get_metadata", {"path": 7}),
        "401": emu.rpc("users/get_current_account", None, token="nope"),
        "409": emu.rpc("files/get_metadata", {"path": base + "/x"}),
    }
    ids = set()
    for expected, r in responses.items():
        assert str(r.status_code) == expected, (expected, r.status_code, r.text)
        rid = r.headers.get("X-Dropbox-Request-Id")
        assert rid, "no X-Dropbox-Request-Id on %s" % expected
        ids.add(rid)
    assert len(ids) == 4, "request ids should be unique per request"


@pytest.mark.parametrize(
    "body",
    [
        {"path": "/a", "include_deleted": False, "not_a_field": 1},  # unknown field
        {"include_deleted": True},  # missing required field
        {"path": 12},  # wrong type
        {"path": "no-leading-slash"},  # pattern violation
    ],
    ids=["unknown-field", "missing-field", "wrong-type", "bad-pattern"],
)
def test_invalid_arguments_are_400_plain_text(emu, body):
    r = emu.rpc("files/get_metadata", body)
    assert r.status_code == 400, (r.status_code, r.text)
    assert r.headers["Content-Type"].startswith("text/plain")
    assert r.text.strip()


def test_malformed_json_is_400(emu):
    r = emu.rpc("files/list_folder", data="{not json", headers={"Content-Type": "application/json"})
    assert r.status_code == 400
    assert r.headers["Content-Type"].startswith("text/plain")


def test_rpc_wrong_content_type_is_400(emu):
    r = emu.rpc("files/list_folder", data=json.dumps({"path": ""}), headers={"Content-Type": "text/plain"})
    assert r.status_code == 400
    assert "content-type" in r.text.lower()


def test_sdk_bad_input_error(emu):
    # Through the SDK a 400 surfaces as BadInputError carrying the text body.
    dbx = emu.client()
    with pytest.raises(dbx_exc.BadInputError) as ei:
        dbx.request_json_string("api", "files/get_metadata", "rpc",
                                json.dumps({"path": "/x", "bogus": True}), "user", None)
    assert ei.value.message


def test_dropbox_api_arg_non_ascii_must_be_escaped(emu, base):
    path = base + "/naïve-文.txt"
    raw_arg = json.dumps({"path": path, "mode": "add"}, ensure_ascii=False).encode("utf-8")
    r = emu.content("files/upload", raw_arg, body=b"raw utf-8 header")
    assert r.status_code == 400, (r.status_code, r.text)
    escaped = emu.content("files/upload", {"path": path, "mode": "add"}, body=b"escaped header")
    assert escaped.status_code == 200, escaped.text
    assert json.loads(escaped.text)["name"] == "naïve-文.txt"


def test_upload_without_api_arg_is_400(emu):
    r = emu.content("files/upload", None, body=b"data")
    assert r.status_code == 400


# --------------------------------------------------------------------------- faults


def test_fault_429_retry_after(emu):
    emu.set_faults("429:every=1,retry_after=2,routes=users/get_current_account")
    r = emu.rpc("users/get_current_account", None)
    assert r.status_code == 429
    assert r.headers.get("Retry-After") == "2"
    dbx = emu.client()
    with pytest.raises(dbx_exc.RateLimitError) as ei:
        dbx.users_get_current_account()
    assert ei.value.backoff == 2
    if ei.value.error is not None:  # JSON body: validated by the SDK
        assert ei.value.error.reason.is_too_many_requests()
    dbx.users_get_space_usage()  # other routes unaffected


def test_sdk_retries_through_rate_limit(emu):
    emu.set_faults("429:every=2,retry_after=1,routes=users/get_space_usage")
    emu.reset_stats()
    dbx = emu.client(max_retries_on_rate_limit=3)
    for _ in range(2):
        dbx.users_get_space_usage()
    n = emu.stats()["routes"]["users/get_space_usage"]["requests"]
    assert n >= 3, "expected at least one 429 + retry, saw %d requests" % n


def test_fault_skip_and_times_bound_the_requests_it_acts_on(emu):
    emu.set_faults("500:skip=1,times=2,routes=users/get_space_usage")
    codes = [emu.rpc("users/get_space_usage", None).status_code for _ in range(5)]
    assert codes == [200, 500, 500, 200, 200]
    emu.clear_faults()


@pytest.mark.parametrize("status", [500, 503])
def test_fault_5xx(emu, status):
    emu.set_faults("%d:every=1,routes=users/get_space_usage" % status)
    r = emu.rpc("users/get_space_usage", None)
    assert r.status_code == status
    with pytest.raises(dbx_exc.InternalServerError) as ei:
        emu.client().users_get_space_usage()
    assert ei.value.status_code == status
    emu.clear_faults()
    emu.client().users_get_space_usage()


def test_sdk_retries_through_503(emu):
    emu.set_faults("503:every=2,routes=users/get_space_usage")
    emu.reset_stats()
    dbx = emu.client(max_retries_on_error=4)
    for _ in range(2):
        dbx.users_get_space_usage()
    assert emu.stats()["routes"]["users/get_space_usage"]["requests"] >= 3


def test_fault_probability_one_always_fires(emu):
    emu.set_faults("503:p=1,routes=users/get_space_usage")
    for _ in range(3):
        assert emu.rpc("users/get_space_usage", None).status_code == 503
    emu.set_faults("503:p=0,routes=users/get_space_usage")
    for _ in range(3):
        assert emu.rpc("users/get_space_usage", None).status_code == 200


def test_post_faults_replaces_active_set(emu):
    emu.set_faults("500:every=1,routes=users/get_space_usage")
    assert emu.rpc("users/get_space_usage", None).status_code == 500
    emu.set_faults("500:every=1,routes=users/get_current_account")
    assert emu.rpc("users/get_space_usage", None).status_code == 200
    assert emu.rpc("users/get_current_account", None).status_code == 500


def test_fault_too_many_write_operations(emu, base):
    emu.set_faults("too_many_write_operations:every=1,routes=files/upload")
    dbx = emu.client()
    with pytest.raises((dbx_exc.RateLimitError, dbx_exc.ApiError)) as ei:
        dbx.files_upload(b"x", base + "/w.txt")
    e = ei.value
    if isinstance(e, dbx_exc.RateLimitError):  # 429 reason too_many_write_operations
        assert e.error is not None and e.error.reason.is_too_many_write_operations()
    else:  # 409 path/too_many_write_operations
        assert e.error.get_path().reason.is_too_many_write_operations()
    emu.clear_faults()
    dbx.files_upload(b"x", base + "/w.txt")


def _route_stat(emu, route, key):
    return emu.stats().get("routes", {}).get(route, {}).get(key, 0)


# The emulator counts what its latency and bandwidth faults did to each route; the tests
# assert that (what happened), not how long it took (the benchmarks time things).
def test_fault_latency(emu):
    before = _route_stat(emu, "users/get_space_usage", "delayed")
    emu.set_faults("latency:ms=600,routes=users/get_space_usage")
    r = emu.rpc("users/get_space_usage", None)
    assert r.status_code == 200
    assert _route_stat(emu, "users/get_space_usage", "delayed") == before + 1


def test_fault_bandwidth(emu, base):
    data = payload(96 * 1024, 1)
    emu.client().files_upload(data, base + "/slow.bin")
    before = _route_stat(emu, "files/download", "throttled_bytes_out")
    emu.set_faults("bandwidth:bps=32768,routes=files/download")
    r = emu.content("files/download", {"path": base + "/slow.bin"}, timeout=30)
    assert r.status_code == 200 and r.content == data
    assert _route_stat(emu, "files/download", "throttled_bytes_out") == before + len(data)


def test_fault_reset_mid_body(emu, base):
    data = payload(256 * 1024, 2)
    emu.client().files_upload(data, base + "/reset.bin")
    emu.set_faults("reset:every=1,after=4096,routes=files/download")
    r = emu.content("files/download", {"path": base + "/reset.bin"}, stream=True, timeout=15)
    got = b""
    with pytest.raises((requests.exceptions.ChunkedEncodingError, requests.exceptions.ConnectionError)):
        for chunk in r.iter_content(8192):
            got += chunk
    assert len(got) < len(data)
    emu.clear_faults()
    _, resp = emu.client().files_download(base + "/reset.bin")
    assert resp.content == data


def test_fault_on_command_line(emulator_factory):
    emu = emulator_factory(["--fault", "500:every=1,routes=users/get_space_usage"])
    dbx = emu.client()
    with pytest.raises(dbx_exc.InternalServerError):
        dbx.users_get_space_usage()
    dbx.files_upload(b"other routes work", "/ok.txt")
    emu.clear_faults()
    dbx.users_get_space_usage()


# --------------------------------------------------------------------------- stats


def test_stats_count_requests_and_bytes(emu, base):
    dbx = emu.client()
    data = payload(20_000, 3)
    emu.reset_stats()
    dbx.files_upload(data, base + "/stats.bin")
    dbx.files_download(base + "/stats.bin")[1].content
    for _ in range(3):
        dbx.files_get_metadata(base + "/stats.bin")
    st = emu.stats()
    routes = st["routes"]
    assert routes["files/get_metadata"]["requests"] == 3
    assert routes["files/upload"]["requests"] == 1
    assert routes["files/upload"]["bytes_in"] >= len(data)
    assert routes["files/download"]["bytes_out"] >= len(data)
    assert routes["files/get_metadata"]["bytes_out"] > 0
    assert st["requests"] >= 5
    emu.reset_stats()
    after = emu.stats()
    assert after["routes"].get("files/get_metadata", {"requests": 0})["requests"] == 0
