#!/usr/bin/env python3
"""Generates signatures.json: signed-request vectors (spec 5.2) computed with
Python's hmac and hashlib, independently of the Go code that checks them.

Regenerate: python3 edge/authn/testdata/gen.py > edge/authn/testdata/signatures.json
"""
import hashlib, hmac, json

SECRET = "b2bsec_a3fe999bda50674cad9a402cc189a80824c0958f016262ac"
cases = [
    ("v2 info, empty body", "GET", "/v2/info", ""),
    ("v2 verify, JSON body", "POST", "/v2/verify/bank",
     '{"payload":"0041000600000101030040220LS2FLLDUC7V3LSUPD7VW5102TH91046AA6","checkDuplicate":true}'),
    ("v2 verify, non-ASCII JSON body", "POST", "/v2/verify/bank",
     '{"payload":"0035000600000101030140214DEMO00000000015102TH9104EE94","remark":"ค่าสินค้า #42 ✓"}'),
    ("b2b with a query string", "GET", "/b2b/branches?limit=10&after=br-main", ""),
    ("b2b PUT quota", "PUT", "/b2b/branches/br-sub/quota", '{"limitQuota":500}'),
    ("v2 with a query string", "GET", "/v2/info?verbose=1", ""),
    ("DELETE, empty body", "DELETE", "/b2b/branches/br-sub", ""),
]
out = []
for i, (name, method, uri, body) in enumerate(cases):
    path = uri[3:] if uri.startswith("/v2/") or uri.startswith("/v2?") else uri
    ts = str(1763800000 + i)
    nonce = "0b1e8f3c-55d2-4a6e-9f41-%012x" % (0x3a7b00000000 + i)
    sts = "\n".join([method, path, ts, nonce, hashlib.sha256(body.encode("utf-8")).hexdigest()])
    sig = hmac.new(SECRET.encode("utf-8"), sts.encode("utf-8"), hashlib.sha256).hexdigest()
    out.append({"name": name, "secret": SECRET, "method": method, "requestUri": uri, "timestamp": ts,
                "nonce": nonce, "body": body, "stringToSign": sts, "signature": sig})
print(json.dumps(out, ensure_ascii=False, indent=1))
