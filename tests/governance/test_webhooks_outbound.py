"""Safe outbound requests: with WEBHOOKS_ALLOW_PRIVATE_NETWORKS off, loopback, private, link-local,
metadata and IPv6 loopback addresses are refused, and so is a name resolving to one; the host is
resolved once and the connection goes to the checked address (DNS rebinding gains nothing);
`check --deploy` refuses the setting."""

import socket

import pytest

from governance.events.outbound import RefusedURL, checked_target, post
from tests.config.test_deploy import clean_environ, deploy_check, readme_production_variables
from tests.governance.webhook_receiver import Receiver


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/hook",
        "http://10.0.0.1/hook",
        "http://192.168.1.10/hook",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]/hook",
        "http://[::ffff:127.0.0.1]/hook",
        "http://localhost:8000/hook",  # a name resolving to 127.0.0.1
        "http://100.64.0.1/hook",
        "ftp://hooks.example.com/",
        "http://user:pass@hooks.example.com/",
    ],
)
def test_private_and_odd_targets_are_refused_with_the_setting_off(url, settings):
    settings.WEBHOOKS_ALLOW_PRIVATE_NETWORKS = False
    with pytest.raises(RefusedURL):
        checked_target(url)
    with pytest.raises(RefusedURL):
        post(url, b"{}", {})


def test_metadata_addresses_stay_refused_with_private_networks_allowed(settings):
    settings.WEBHOOKS_ALLOW_PRIVATE_NETWORKS = True
    assert checked_target("http://127.0.0.1:9/")[3].is_loopback
    with pytest.raises(RefusedURL):
        checked_target("http://169.254.169.254/latest/meta-data/")


def test_a_name_with_any_private_address_is_refused(monkeypatch, settings):
    settings.WEBHOOKS_ALLOW_PRIVATE_NETWORKS = False
    answers = [
        (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.215.14", 80)),
        (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", 80)),
    ]
    monkeypatch.setattr(socket, "getaddrinfo", lambda *a, **k: answers)  # the DNS, outside the project
    with pytest.raises(RefusedURL):
        checked_target("http://mixed.example/")


def test_the_host_is_resolved_once_and_the_checked_address_is_the_one_connected(monkeypatch, settings):
    """A rebinding name answers the receiver's address first and another one after: the request
    still reaches the first (checked) address, with the name in the Host header."""
    settings.WEBHOOKS_ALLOW_PRIVATE_NETWORKS = True
    receiver = Receiver().start()
    try:
        port = receiver.server.server_address[1]
        real = socket.getaddrinfo
        calls = []

        def rebinding(host, *args, **kwargs):
            if host != "rebind.example":
                return real(host, *args, **kwargs)
            calls.append(host)
            address = "127.0.0.1" if len(calls) == 1 else "10.255.255.1"
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]

        monkeypatch.setattr(socket, "getaddrinfo", rebinding)
        answer = post(f"http://rebind.example:{port}/hook", b'{"x":1}', {})
        assert answer.status == 200 and calls == ["rebind.example"]
        assert receiver.received[0].headers["host"] == f"rebind.example:{port}"
    finally:
        receiver.stop()


def test_the_response_is_read_only_up_to_the_cap(settings):
    settings.WEBHOOKS_ALLOW_PRIVATE_NETWORKS = True
    settings.WEBHOOKS_MAX_RESPONSE_BYTES = 1000
    receiver = Receiver(answer=lambda r: (200, b"x" * 50_000, {})).start()
    try:
        assert len(post(receiver.url, b"{}", {}).body) == 1000
    finally:
        receiver.stop()


def test_deploy_check_refuses_private_networks(tmp_path):
    env = clean_environ(tmp_path, **readme_production_variables(), WEBHOOKS_ALLOW_PRIVATE_NETWORKS="true")
    result = deploy_check(env)
    assert result.returncode != 0 and "governance.E001" in result.stdout + result.stderr
