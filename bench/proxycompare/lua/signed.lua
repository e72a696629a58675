-- wrk script for target (b): the edge with signed requests (spec 5.2).
--
-- Every request is POST /v2/verify/bank with the same small JSON body and
--   X-API-Key   the branch key (UUID v4)
--   X-Timestamp the current Unix time in seconds
--   X-Nonce     a fresh UUID v4: run-random bits, the thread's number and a
--               per-thread counter, so nonces never repeat within a run, across
--               threads or across runs against the same edge
--   X-Signature lowercase hex HMAC-SHA256(secret,
--               "POST\n/verify/bank\n" .. ts .. "\n" .. nonce .. "\n" .. sha256hex(body))
--
-- wrk embeds LuaJIT without a crypto library, so SHA-256 and HMAC are
-- written here with the `bit` library. The body's hash is computed once (the
-- body never changes) and the HMAC's inner and outer key blocks are
-- compressed once, so a request costs three compressions for the inner hash
-- of the 130-byte string-to-sign and one for the outer hash.
--
-- Environment: BENCH_KEY (branch key) and BENCH_SECRET (signing secret);
-- BENCH_POOL, the requests each thread signs before the run (see init), and
-- BENCH_READY, a file init appends a line to when they are signed.
--
-- Outside wrk (no `wrk` global), the file only defines
-- sha256_hex, hmac_sha256_hex, Hmac and make_nonce_prefix, which the
-- proxycompare Go test checks against crypto/hmac with a standalone luajit.

local bit = require("bit")
local band, bor, bxor, bnot = bit.band, bit.bor, bit.bxor, bit.bnot
local ror, lshift, rshift, tobit, tohex = bit.ror, bit.lshift, bit.rshift, bit.tobit, bit.tohex
local byte, char, rep, fmt, concat = string.byte, string.char, string.rep, string.format, table.concat

local K = {
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
}
for i = 1, 64 do K[i] = tobit(K[i]) end
local H0 = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19 }
for i = 1, 8 do H0[i] = tobit(H0[i]) end

local W = {}
for i = 1, 64 do W[i] = 0 end

-- compress runs the SHA-256 compression function on state H (8 words,
-- updated in place) with the block already loaded in W[1..16].
local function compress(H)
  for j = 17, 64 do
    local w15, w2 = W[j - 15], W[j - 2]
    local s0 = bxor(ror(w15, 7), ror(w15, 18), rshift(w15, 3))
    local s1 = bxor(ror(w2, 17), ror(w2, 19), rshift(w2, 10))
    W[j] = tobit(W[j - 16] + s0 + W[j - 7] + s1)
  end
  local a, b, c, d, e, f, g, h = H[1], H[2], H[3], H[4], H[5], H[6], H[7], H[8]
  for j = 1, 64 do
    local S1 = bxor(ror(e, 6), ror(e, 11), ror(e, 25))
    local ch = bxor(band(e, f), band(bnot(e), g))
    local t1 = h + S1 + ch + K[j] + W[j] -- at most 5 * 2^31 in size: exact in a double
    local S0 = bxor(ror(a, 2), ror(a, 13), ror(a, 22))
    local maj = bxor(band(a, b), band(a, c), band(b, c))
    h, g, f, e, d, c, b, a = g, f, e, tobit(d + t1), c, b, a, tobit(t1 + S0 + maj)
  end
  H[1], H[2], H[3], H[4] = tobit(H[1] + a), tobit(H[2] + b), tobit(H[3] + c), tobit(H[4] + d)
  H[5], H[6], H[7], H[8] = tobit(H[5] + e), tobit(H[6] + f), tobit(H[7] + g), tobit(H[8] + h)
end

-- load puts the 64 bytes of s from offset i (1-based) into W[1..16].
local function load(s, i)
  for j = 1, 16 do
    local b1, b2, b3, b4 = byte(s, i, i + 3)
    W[j] = bor(lshift(b1, 24), lshift(b2, 16), lshift(b3, 8), b4)
    i = i + 4
  end
end

-- pad returns msg with SHA-256 padding for a message of which `before`
-- bytes were already compressed (a multiple of 64).
local function pad(msg, before)
  local n = #msg
  local bits = (before + n) * 8
  local zeros = (55 - n) % 64
  -- 64-bit big-endian length; messages here are far below 2^32 bits
  return msg .. "\128" .. rep("\0", zeros) .. "\0\0\0\0" ..
    char(band(rshift(bits, 24), 255), band(rshift(bits, 16), 255), band(rshift(bits, 8), 255), band(bits, 255))
end

local function copy8(H) return { H[1], H[2], H[3], H[4], H[5], H[6], H[7], H[8] } end

-- finish hashes msg from state H (copied), `before` bytes already in it.
local function finish(H, msg, before)
  local S = copy8(H)
  local p = pad(msg, before)
  for i = 1, #p, 64 do
    load(p, i)
    compress(S)
  end
  return S
end

local function hex8(S)
  return tohex(S[1], 8) .. tohex(S[2], 8) .. tohex(S[3], 8) .. tohex(S[4], 8) ..
    tohex(S[5], 8) .. tohex(S[6], 8) .. tohex(S[7], 8) .. tohex(S[8], 8)
end

local function bytes8(S)
  local t = {}
  for i = 1, 8 do
    local w = S[i]
    t[i] = char(band(rshift(w, 24), 255), band(rshift(w, 16), 255), band(rshift(w, 8), 255), band(w, 255))
  end
  return concat(t)
end

function sha256_hex(msg) return hex8(finish(H0, msg, 0)) end

-- Hmac returns a function computing the lowercase hex HMAC-SHA256 of a
-- message under key, with the key's inner and outer blocks compressed once.
function Hmac(key)
  if #key > 64 then key = bytes8(finish(H0, key, 0)) end
  key = key .. rep("\0", 64 - #key)
  local ipad, opad = {}, {}
  for i = 1, 64 do
    local k = byte(key, i)
    ipad[i] = char(bxor(k, 0x36))
    opad[i] = char(bxor(k, 0x5c))
  end
  local inner, outer = copy8(H0), copy8(H0)
  load(concat(ipad), 1); compress(inner)
  load(concat(opad), 1); compress(outer)
  return function(msg)
    local ih = finish(inner, msg, 64)
    -- outer block: the inner digest's 8 words, then padding for 64+32 bytes
    local S = copy8(outer)
    for i = 1, 8 do W[i] = ih[i] end
    W[9] = tobit(0x80000000)
    for i = 10, 15 do W[i] = 0 end
    W[16] = (64 + 32) * 8
    compress(S)
    return hex8(S)
  end
end

function hmac_sha256_hex(key, msg) return Hmac(key)(msg) end

-- make_nonce_prefix returns the first 24 characters of this thread's nonces,
-- a UUID v4 up to its last group: 44 random bits (r1: 32, r2: 12) for the
-- run, the thread number and the variant nibble 8; the last group is the
-- thread's counter as 12 hex digits.
function make_nonce_prefix(r1, r2, tid)
  return fmt("%08x-%04x-4%03x-8000-", r1 % 4294967296, tid % 65536, r2 % 4096)
end

if type(wrk) ~= "table" then
  return -- loaded outside wrk: definitions only
end

local key = os.getenv("BENCH_KEY") or error("BENCH_KEY is not set")
local secret = os.getenv("BENCH_SECRET") or error("BENCH_SECRET is not set")
local body = '{"payload":"0041000600000101030040220015353134529BPM054705102TH9104C0D5","amount":1500}'
local body_hash = sha256_hex(body)

-- setup runs in the main Lua state once per thread: number the threads and
-- hand them this run's random bits.
local threads = {}
local rand1, rand2
function setup(thread)
  if not rand1 then
    local f = io.open("/dev/urandom", "rb")
    local s = f:read(6)
    f:close()
    local b1, b2, b3, b4, b5, b6 = byte(s, 1, 6)
    rand1 = ((b1 * 256 + b2) * 256 + b3) * 256 + b4
    rand2 = b5 * 256 + b6
  end
  threads[#threads + 1] = thread
  -- globals of the thread's own Lua state, read by init
  thread:set("tid", #threads)
  thread:set("nonce_r1", rand1)
  thread:set("nonce_r2", rand2)
end

local sign, head, prefix
local counter = 0
local last_ts, ts_s
local pool, pooled, taken = {}, 0, 0
signed_late = 0 -- requests signed during the run, read by done

-- build returns the next signed request.
local function build()
  counter = counter + 1
  local now = os.time()
  if now ~= last_ts then
    last_ts, ts_s = now, tostring(now)
  end
  local nonce = prefix .. fmt("%012x", counter)
  local sig = sign("POST\n/verify/bank\n" .. ts_s .. "\n" .. nonce .. "\n" .. body_hash)
  return head .. ts_s .. "\r\nX-Nonce: " .. nonce .. "\r\nX-Signature: " .. sig .. "\r\n\r\n" .. body
end

-- init signs BENCH_POOL requests (per thread) before wrk's clock starts: a
-- signature costs this LuaJIT code about 8 µs, more than the edge takes to
-- verify it, on the core the upstream needs too. With the requests signed
-- beforehand, wrk sends prebuilt bytes for every target, and what (b)
-- measures is the edge. Their timestamps are the time they were signed,
-- well inside the edge's 5 minutes for a run of seconds.
function init(args)
  sign = Hmac(secret)
  prefix = make_nonce_prefix(nonce_r1 or 0, nonce_r2 or 0, tid or 0)
  head = "POST /v2/verify/bank HTTP/1.1\r\nHost: " .. wrk.host .. ":" .. tostring(wrk.port) ..
    "\r\nContent-Type: application/json\r\nContent-Length: " .. #body ..
    "\r\nX-API-Key: " .. key .. "\r\nX-Timestamp: "
  pooled = tonumber(os.getenv("BENCH_POOL") or "0") or 0
  for i = 1, pooled do pool[i] = build() end
  -- a line per thread in BENCH_READY: run.sh starts its CPU accounting
  -- when every thread has its pool (wrk's own output is buffered)
  local ready = os.getenv("BENCH_READY")
  if ready then
    local f = io.open(ready, "a")
    f:write("ready\n")
    f:close()
  end
end

-- request sends the next presigned request; past the pool it signs one now.
function request()
  taken = taken + 1
  if taken <= pooled then
    local r = pool[taken]
    pool[taken] = nil
    return r
  end
  signed_late = signed_late + 1
  return build()
end

-- done reports the requests the pool did not cover (run.sh flags a round
-- with any).
function done(summary, latency, requests)
  local late = 0
  for _, t in ipairs(threads) do late = late + (t:get("signed_late") or 0) end
  io.write(fmt("Signed during the run: %d\n", late))
end
