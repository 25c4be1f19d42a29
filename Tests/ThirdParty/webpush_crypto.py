#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Herald's Web Push crypto (Sources/WebPush) against the Python libraries the ecosystem uses.

Environment:
  WEBPUSH_INPUT  path to a JSON file the Swift test (WebPushTests/ThirdPartyCryptoTests) wrote:
    receiver_private, receiver_public, auth   a subscription's key pair and auth secret (base64url)
    messages          [{plaintext, body}]     Herald's aes128gcm bodies for that subscription
    vapid             {authorization, audience, subject, expires_at, now, public_key}
                                              a header Herald's VAPIDKey made
    vapid_private     a VAPID private scalar (base64url) for pywebpush to sign with
    endpoint          an http://127.0.0.1 push resource URL (no request is ever sent)
    pywebpush_plaintexts  [base64url]         what pywebpush should encrypt for Herald to decrypt

(1) http_ece.decrypt opens every Herald body with the receiver's private key and auth secret, and
    a from-scratch RFC 8291 decryption with `cryptography` (HKDF, AES-GCM) agrees; the header is
    checked octet by octet (rs 4096, idlen 65, one record).
(2) py-vapid's Vapid02.verify checks the signature of Herald's Authorization header. It splits
    the header on its last space, so it only parses "vapid t=...,k=..." with no space after the
    comma, which RFC 8292 allows: the header is normalised (", " -> ",") before it is handed over.
    Vapid02 checks nothing but the signature, so PyJWT decodes the JWT against `k` as well and
    the claims are checked here: aud, exp (after now, at most 24 h later), sub (mailto:/https:),
    and the JOSE header.
(3) pywebpush.webpush() encrypts and signs for the same subscription; its requests session is a
    stand-in that records the request instead of sending it. The bodies, plaintexts and
    Authorization headers are printed for the Swift test, which decrypts and verifies them with
    WebPushEncryption.decrypt and VAPID.verify. WebPusher.encode and http_ece.encrypt bodies too.

Prints one JSON line with what happened; exits non-zero on any mismatch.
Needs: python3 -m pip install http-ece py-vapid pywebpush cryptography pyjwt
"""

import base64
import json
import os
import sys
import time

import http_ece
import jwt
import py_vapid
import pywebpush
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF


def b64d(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def b64e(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def hkdf(salt, ikm, info, length):
    return HKDF(algorithm=hashes.SHA256(), length=length, salt=salt, info=info).derive(ikm)


def rfc8291_decrypt(body, receiver, auth):
    """RFC 8291 §3.4 and RFC 8188 §2, written out from the RFCs with no Web Push library."""
    salt, rs, idlen = body[:16], int.from_bytes(body[16:20], "big"), body[20]
    sender_public = body[21 : 21 + idlen]
    record = body[21 + idlen :]
    sender = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), sender_public)
    receiver_public = receiver.public_key().public_bytes(
        serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
    )
    ecdh = receiver.exchange(ec.ECDH(), sender)
    ikm = hkdf(auth, ecdh, b"WebPush: info\x00" + receiver_public + sender_public, 32)
    cek = hkdf(salt, ikm, b"Content-Encoding: aes128gcm\x00", 16)
    nonce = hkdf(salt, ikm, b"Content-Encoding: nonce\x00", 12)
    padded = AESGCM(cek).decrypt(nonce, record, None).rstrip(b"\x00")
    if not padded.endswith(b"\x02"):
        raise ValueError("the last record does not end in the 0x02 delimiter")
    return padded[:-1], rs, idlen, len(record)


class RecordingSession:
    """Takes pywebpush's POST and keeps it; nothing leaves the process."""

    class Response:
        status_code = 201
        reason = "Created"
        text = ""
        headers = {"Location": "http://127.0.0.1/m/1"}

    def __init__(self):
        self.requests = []

    def post(self, endpoint, timeout=None, data=None, headers=None, **_):
        self.requests.append({"endpoint": endpoint, "data": data, "headers": dict(headers or {})})
        return self.Response()


def main():
    with open(os.environ["WEBPUSH_INPUT"]) as handle:
        given = json.load(handle)
    failures = []
    results = {}

    def check(name, ok, detail=None):
        if not ok:
            failures.append(name if detail is None else "%s: %s" % (name, detail))

    receiver = ec.derive_private_key(int.from_bytes(b64d(given["receiver_private"]), "big"), ec.SECP256R1())
    receiver_public = receiver.public_key().public_bytes(
        serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
    )
    check("receiver public key", b64e(receiver_public) == given["receiver_public"])
    auth = b64d(given["auth"])

    # (1) Herald's bodies, opened by http_ece and by the RFC written out.
    opened = 0
    for index, message in enumerate(given["messages"]):
        plaintext, body = b64d(message["plaintext"]), b64d(message["body"])
        try:
            by_ece = http_ece.decrypt(body, private_key=receiver, auth_secret=auth, version="aes128gcm")
            check("http_ece plaintext %d" % index, by_ece == plaintext, "%d octets" % len(by_ece))
        except Exception as error:  # noqa: BLE001 - report what came instead
            check("http_ece decrypt %d" % index, False, "%s: %s" % (type(error).__name__, error))
            continue
        try:
            by_hand, rs, idlen, record = rfc8291_decrypt(body, receiver, auth)
            check("rfc8291 plaintext %d" % index, by_hand == plaintext)
            check("rs %d" % index, rs == 4096, rs)
            check("idlen %d" % index, idlen == 65, idlen)
            check("one record %d" % index, record == len(plaintext) + 1 + 16 and record <= rs, record)
        except Exception as error:  # noqa: BLE001
            check("rfc8291 decrypt %d" % index, False, "%s: %s" % (type(error).__name__, error))
            continue
        opened += 1
    results["decrypted"] = opened

    # (2) Herald's VAPID header, verified by py-vapid and PyJWT; claims judged here.
    vapid = given["vapid"]
    header = vapid["authorization"]
    check("vapid scheme", header.startswith("vapid t="), header[:12])
    normalised = header.replace(", ", ",")
    try:
        check("Vapid02.verify", py_vapid.Vapid02.verify(normalised) is True)
    except Exception as error:  # noqa: BLE001
        check("Vapid02.verify", False, "%s: %s" % (type(error).__name__, error))
    # The check above has to be able to fail: a signature of another token must not verify.
    params = dict(item.split("=", 1) for item in normalised.split(" ", 1)[1].split(","))
    token, key = params["t"], params["k"]
    head, claims_part, signature = token.split(".")
    forged = "vapid t=%s.%s.%s,k=%s" % (head, b64e(b'{"aud":"x","exp":1,"sub":"mailto:a@b.c"}'), signature, key)
    try:
        check("Vapid02 refuses a forged token", py_vapid.Vapid02.verify(forged) is not True)
    except Exception:  # noqa: BLE001 - raising is refusing too
        pass
    check("k is Herald's public key", key == vapid["public_key"])
    public = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), b64d(key))
    try:
        claims = jwt.decode(
            token,
            key=public,
            algorithms=["ES256"],
            audience=vapid["audience"],
            options={"require": ["aud", "exp", "sub"], "verify_exp": False},
        )
        check("jose header", jwt.get_unverified_header(token) == {"typ": "JWT", "alg": "ES256"})
        check("aud", claims["aud"] == vapid["audience"], claims["aud"])
        check("exp", claims["exp"] == vapid["expires_at"], claims["exp"])
        check("exp in the future", claims["exp"] > vapid["now"])
        check("exp within 24 h", claims["exp"] - vapid["now"] <= 86400)
        check("sub", claims["sub"] == vapid["subject"] and claims["sub"].startswith(("mailto:", "https:")))
        check("exp is an integer", isinstance(claims["exp"], int))
        results["vapid_claims"] = claims
    except Exception as error:  # noqa: BLE001
        check("PyJWT decode", False, "%s: %s" % (type(error).__name__, error))

    # (3) What pywebpush (and http_ece on its own) send, for Herald to decrypt and verify.
    subscription = {
        "endpoint": given["endpoint"],
        "keys": {"p256dh": given["receiver_public"], "auth": given["auth"]},
    }
    signer = py_vapid.Vapid02.from_raw(given["vapid_private"].encode())
    session = RecordingSession()
    sent = []
    for text in given["pywebpush_plaintexts"]:
        plaintext = b64d(text)
        before = len(session.requests)
        try:
            pywebpush.webpush(
                subscription,
                data=plaintext,
                vapid_private_key=signer,
                vapid_claims={"sub": "mailto:push@herald.example"},
                ttl=60,
                requests_session=session,
            )
        except Exception as error:  # noqa: BLE001
            check("pywebpush.webpush", False, "%s: %s" % (type(error).__name__, error))
            continue
        request = session.requests[before]
        headers = {name.lower(): value for name, value in request["headers"].items()}
        check("pywebpush content-encoding", headers.get("content-encoding") == "aes128gcm", headers)
        sent.append({
            "source": "webpush",
            "plaintext": text,
            "body": b64e(request["data"]),
            "authorization": headers.get("authorization", ""),
        })
    for text in given["pywebpush_plaintexts"][:1]:
        encoded = pywebpush.WebPusher(subscription).encode(b64d(text), content_encoding="aes128gcm")
        sent.append({"source": "WebPusher.encode", "plaintext": text, "body": b64e(encoded["body"])})
        sender = ec.generate_private_key(ec.SECP256R1())
        body = http_ece.encrypt(
            b64d(text),
            salt=os.urandom(16),
            private_key=sender,
            dh=receiver_public,
            auth_secret=auth,
            version="aes128gcm",
        )
        sent.append({"source": "http_ece.encrypt", "plaintext": text, "body": b64e(body)})
    results["sent"] = sent
    results["now"] = int(time.time())
    results["failures"] = failures
    print(json.dumps(results, sort_keys=True))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
