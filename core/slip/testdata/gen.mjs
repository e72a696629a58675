// gen.mjs writes the golden vectors of package slip (vectors.json) from
// promptparse, the reference implementation of the Thai slip mini-QR formats.
//
// Regenerate from the repository root (needs node and the npm registry; CI
// needs neither, as vectors.json is committed):
//
//   npm install --prefix /tmp/promptparse promptparse@1.6.0 &&
//     PROMPTPARSE_PREFIX=/tmp/promptparse node core/slip/testdata/gen.mjs > core/slip/testdata/vectors.json
//
// Each vector records the payload, what promptparse's validators make of it
// (validate.slipVerify and validate.trueMoneySlipVerify, both strict about the
// CRC), and what package slip must do with it. The two agree unless the vector
// says why not in "deviation": either a tolerance package slip adds (lower
// CRC case, dropped CRC zeros, whitespace) or a check promptparse skips. A
// vector from promptparse's generator also carries its input, and the Go test
// checks that Encode reproduces the payload byte for byte.

import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import path from 'node:path';

const prefix = path.resolve(process.env.PROMPTPARSE_PREFIX ?? '.');
const require = createRequire(path.join(prefix, 'gen.cjs'));
const pp = require('promptparse');
const ppVersion = JSON.parse(
  readFileSync(path.join(prefix, 'node_modules', 'promptparse', 'package.json'), 'utf8'),
).version;

// tlv encodes one tag the way promptparse's encode does.
const tlv = (id, v) => id + String(v.length).padStart(2, '0') + v;
const seal = (body, upper = true) => pp.withCrcTag(body, '91', upper);
const crcOf = (s) => parseInt(pp.checksum(s), 16);
const hex = (n, width, upper = true) => {
  const h = n.toString(16).padStart(width, '0');
  return upper ? h.toUpperCase() : h;
};

const bankSub = (code, ref) => tlv('00', '000001') + tlv('01', code) + tlv('02', ref);
const bankBody = (code, ref) => tlv('00', bankSub(code, ref)) + tlv('51', 'TH');
const walletSub = (ev, id, date, v0 = '01', v1 = '01') =>
  tlv('00', v0) + tlv('01', v1) + tlv('02', ev) + tlv('03', id) + tlv('04', date);
const walletBody = (ev, id, date) => tlv('00', walletSub(ev, id, date));

// verdicts runs both promptparse validators. JSON drops undefined fields.
function verdicts(payload) {
  const bank = pp.validate.slipVerify(payload);
  const wallet = pp.validate.trueMoneySlipVerify(payload);
  return { bank: bank ?? null, wallet: wallet ?? null };
}

const vectors = [];
const names = new Set();

// add records one vector. want is 'bank', 'wallet' or 'none': the one parser
// of package slip that must accept the payload. fields are what it must
// return; they default to promptparse's answer.
function add({ name, payload, want, fields, input, deviation }) {
  if (names.has(name)) throw new Error(`duplicate vector name ${name}`);
  names.add(name);
  const promptparse = verdicts(payload);
  const got = { bank: promptparse.bank !== null, wallet: promptparse.wallet !== null };
  const exp = { bank: want === 'bank', wallet: want === 'wallet' };
  const agrees = got.bank === exp.bank && got.wallet === exp.wallet;
  if (!agrees && !deviation) {
    throw new Error(`${name}: promptparse says ${JSON.stringify(got)}, want ${want}, and no deviation given`);
  }
  if (agrees && deviation) {
    throw new Error(`${name}: deviation given but promptparse agrees`);
  }
  if (want === 'bank' && !fields) {
    if (!promptparse.bank) throw new Error(`${name}: no fields to expect`);
    fields = { bankCode: promptparse.bank.sendingBank, transRef: promptparse.bank.transRef };
  }
  if (want === 'wallet' && !fields) {
    if (!promptparse.wallet) throw new Error(`${name}: no fields to expect`);
    const w = promptparse.wallet;
    fields = { eventType: w.eventType, transactionId: w.transactionId, date: w.date };
  }
  // Where both accept, they must extract the same values.
  if (want === 'bank' && promptparse.bank &&
      (promptparse.bank.sendingBank !== fields.bankCode || promptparse.bank.transRef !== fields.transRef)) {
    throw new Error(`${name}: promptparse extracts ${JSON.stringify(promptparse.bank)}`);
  }
  if (want === 'wallet' && promptparse.wallet &&
      (promptparse.wallet.eventType !== fields.eventType ||
       promptparse.wallet.transactionId !== fields.transactionId ||
       promptparse.wallet.date !== fields.date)) {
    throw new Error(`${name}: promptparse extracts ${JSON.stringify(promptparse.wallet)}`);
  }
  const v = { name };
  if (input) v.input = input;
  v.payload = payload;
  v.promptparse = promptparse;
  v.want = want;
  if (fields) v.fields = fields;
  if (deviation) v.deviation = deviation;
  vectors.push(v);
}

// genBank and genWallet add a vector from promptparse's generator.
function genBank(name, sendingBank, transRef, opts = {}) {
  const payload = pp.generate.slipVerify({ sendingBank, transRef });
  add({
    name, payload, input: { kind: 'bank', bankCode: sendingBank, transRef },
    want: opts.want ?? 'bank',
    fields: (opts.want ?? 'bank') === 'bank' ? { bankCode: sendingBank, transRef } : undefined,
    deviation: opts.deviation,
  });
  return payload;
}
function genWallet(name, eventType, transactionId, date, opts = {}) {
  const payload = pp.generate.trueMoneySlipVerify({ eventType, transactionId, date });
  add({
    name, payload, input: { kind: 'wallet', eventType, transactionId, date },
    want: opts.want ?? 'wallet',
    fields: (opts.want ?? 'wallet') === 'wallet' ? { eventType, transactionId, date } : undefined,
    deviation: opts.deviation,
  });
  return payload;
}

// search returns the first n >= 0 for which pred(make(n)) holds: inputs whose
// CRC has leading zero nibbles, to exercise the dropped-zeros tolerance.
function search(make, pred) {
  for (let n = 0; n < 10_000_000; n++) {
    const x = make(n);
    if (pred(x)) return x;
  }
  throw new Error('search exhausted');
}

// ---- Generated, valid -------------------------------------------------------

const ppTest = genBank('bank/promptparse-readme', '002', '0002123123121200011');
if (ppTest !== '004000060000010103002021900021231231212000115102TH91049C30') {
  throw new Error('promptparse no longer generates its own test vector');
}
const kbank = genBank('bank/kbank', '004', '015123101530BPM05923');
genBank('bank/promptparse-test', '014', '00111222233344ABCD12');
genBank('bank/scb-long-ref', '014', '202401255XnQ1bGxkR7W2dFfA9sUeZ');
genBank('bank/bbl', '002', '2024012512345678');
genBank('bank/ktb', '006', '0000A1B2C3D4E5F6');
genBank('bank/bay', '025', 'BAYQR0000123456789');
genBank('bank/ttb', '011', '11EE2233');
genBank('bank/gsb', '030', '9');
genBank('bank/max-ref', '069', 'A'.repeat(25) + '0123456789'.repeat(2) + 'ZZZZZ');

// Bank inputs whose CRC is below 0x1000, 0x100 and 0x10.
const bankRef = (n) => 'CRC' + String(n).padStart(8, '0');
const bank3 = search((n) => bankRef(n), (r) => crcOf(bankBody('004', r) + '9104') < 0x1000 && crcOf(bankBody('004', r) + '9104') >= 0x100);
const bank2 = search((n) => bankRef(n), (r) => crcOf(bankBody('004', r) + '9104') < 0x100 && crcOf(bankBody('004', r) + '9104') >= 0x10);
const bank1 = search((n) => bankRef(n), (r) => crcOf(bankBody('004', r) + '9104') < 0x10);
const bankZ3 = genBank('bank/crc-top-nibble-zero', '004', bank3);
const bankZ2 = genBank('bank/crc-top-byte-zero', '004', bank2);
const bankZ1 = genBank('bank/crc-three-zero-nibbles', '004', bank1);

const tmDoc = genWallet('wallet/promptparse-readme', 'P2P', 'TM1234567890', '30092026');
genWallet('wallet/p2p', 'P2P', 'TXN0001234567', '25012024');
genWallet('wallet/leap-day', 'P2P', '50012345678901', '29022024');
genWallet('wallet/year-end', 'TOPUP', '1', '31122025');
genWallet('wallet/underscore-event', 'BILL_PAY', '7700112233', '01012000');

const txid = (n) => 'T' + String(n).padStart(10, '0');
const wcrc = (id) => crcOf(walletBody('P2P', id, '15062025') + '9104');
const wallet3 = search(txid, (id) => wcrc(id) < 0x1000 && wcrc(id) >= 0x100);
const wallet2 = search(txid, (id) => wcrc(id) < 0x100);
const walletZ3 = genWallet('wallet/crc-top-nibble-zero', 'P2P', wallet3, '15062025');
const walletZ2 = genWallet('wallet/crc-top-byte-zero', 'P2P', wallet2, '15062025');

// ---- Generated from inputs package slip refuses --------------------------------
// Encode must still match promptparse byte for byte; parsing must refuse.

genBank('bank/gen/one-digit-bank', '4', 'ABC123', {
  want: 'none', deviation: 'promptparse accepts any non-empty sending bank; slip wants exactly 3 digits',
});
genBank('bank/gen/ref-with-dash', '004', '0151-2310', {
  want: 'none', deviation: 'promptparse accepts any transRef; slip wants ASCII letters and digits',
});
genBank('bank/gen/ref-too-long', '004', 'R'.repeat(51), {
  want: 'none', deviation: 'promptparse has no transRef length limit; slip allows at most 50',
});
genWallet('wallet/gen/feb-30', 'P2P', 'TM1234567890', '30022024', {
  want: 'none', deviation: 'promptparse does not check the date; slip wants a real DDMMYYYY date',
});
genWallet('wallet/gen/feb-29-2023', 'P2P', 'TM1234567890', '29022023', {
  want: 'none', deviation: 'promptparse does not check the date; 2023 is no leap year',
});
genWallet('wallet/gen/date-iso', 'P2P', 'TM1234567890', '20240125', {
  want: 'none', deviation: 'promptparse does not check the date; month 24 does not exist',
});
genWallet('wallet/gen/txid-symbol', 'P2P', 'TM#1234', '25012024', {
  want: 'none', deviation: 'promptparse accepts any transaction id; slip wants ASCII letters and digits',
});

// ---- Tolerances: what real apps print -------------------------------------------

const bankFields = (code, ref) => ({ bankCode: code, transRef: ref });
const walletFields = (id) => ({ eventType: 'P2P', transactionId: id, date: '15062025' });
const cut = (p) => p.slice(0, -8); // payload without "9104XXXX"
const crcHex = (p) => p.slice(-4);

if (!/[A-F]/.test(crcHex(ppTest))) throw new Error('pick an input whose CRC has a letter');
add({ name: 'bank/tol/lower-crc', payload: cut(ppTest) + '9104' + crcHex(ppTest).toLowerCase(), want: 'bank' });
add({ name: 'bank/tol/lower-crc-zero-nibble', payload: cut(bankZ3) + '9104' + crcHex(bankZ3).toLowerCase(), want: 'bank' });
add({
  name: 'bank/tol/dropped-zero-len04', payload: cut(bankZ3) + '9104' + crcHex(bankZ3).slice(1), want: 'bank',
});
add({
  name: 'bank/tol/dropped-zero-len03', payload: cut(bankZ3) + '9103' + crcHex(bankZ3).slice(1), want: 'bank',
  fields: bankFields('004', bank3),
  deviation: 'tolerance: length 03 with the CRC computed over the prefix ending 9104; promptparse only pads after 9104',
});
add({
  name: 'bank/tol/dropped-zero-len03-lower', payload: cut(bankZ3) + '9103' + crcHex(bankZ3).slice(1).toLowerCase(), want: 'bank',
  fields: bankFields('004', bank3),
  deviation: 'tolerance: dropped zero and lower case; promptparse only pads after 9104',
});
add({ name: 'bank/tol/dropped-two-zeros-len04', payload: cut(bankZ2) + '9104' + crcHex(bankZ2).slice(2), want: 'bank' });
add({
  name: 'bank/tol/dropped-two-zeros-len02', payload: cut(bankZ2) + '9102' + crcHex(bankZ2).slice(2), want: 'bank',
  fields: bankFields('004', bank2),
  deviation: 'tolerance: length 02 with two dropped zeros; promptparse only pads after 9104',
});
add({ name: 'bank/tol/dropped-three-zeros-len04', payload: cut(bankZ1) + '9104' + crcHex(bankZ1).slice(3), want: 'bank' });
add({
  name: 'bank/tol/dropped-three-zeros-len01', payload: cut(bankZ1) + '9101' + crcHex(bankZ1).slice(3), want: 'bank',
  fields: bankFields('004', bank1),
  deviation: 'tolerance: length 01 with three dropped zeros; promptparse only pads after 9104',
});
// A CRC computed over the prefix as printed, ending 9103.
const asPrinted = search((n) => bankRef(n), (r) => {
  const c = crcOf(bankBody('004', r) + '9103');
  return c < 0x1000 && c >= 0x100 && crcOf(bankBody('004', r) + '9104') >= 0x1000;
});
{
  const body = bankBody('004', asPrinted) + '9103';
  add({
    name: 'bank/tol/crc-over-printed-prefix', payload: body + hex(crcOf(body), 3), want: 'bank',
    fields: bankFields('004', asPrinted),
    deviation: 'tolerance: length 03 with the CRC computed over the prefix as printed, ending 9103',
  });
}
add({
  name: 'bank/tol/whitespace', payload: ' \t' + ppTest + '\r\n', want: 'bank',
  fields: bankFields('002', '0002123123121200011'),
  deviation: 'tolerance: slip trims surrounding white space (scanners add line ends); promptparse rejects it',
});
add({
  name: 'wallet/tol/upper-crc', payload: cut(tmDoc) + '9104' + crcHex(tmDoc).toUpperCase(), want: 'wallet',
});
add({
  name: 'wallet/tol/dropped-zero-len04', payload: cut(walletZ3) + '9104' + crcHex(walletZ3).slice(1), want: 'wallet',
  fields: walletFields(wallet3),
  deviation: 'tolerance: promptparse pads a short CRC after 9104 for bank slips only; slip does it for both kinds',
});
add({
  name: 'wallet/tol/dropped-zero-len03', payload: cut(walletZ3) + '9103' + crcHex(walletZ3).slice(1), want: 'wallet',
  fields: walletFields(wallet3),
  deviation: 'tolerance: length 03 with a dropped zero',
});
add({
  name: 'wallet/tol/dropped-two-zeros-len02-upper', payload: cut(walletZ2) + '9102' + crcHex(walletZ2).slice(2).toUpperCase(), want: 'wallet',
  fields: walletFields(wallet2),
  deviation: 'tolerance: length 02 with two dropped zeros',
});
add({
  name: 'wallet/tol/whitespace', payload: '\n' + tmDoc + ' ', want: 'wallet',
  fields: { eventType: 'P2P', transactionId: 'TM1234567890', date: '30092026' },
  deviation: 'tolerance: slip trims surrounding white space; promptparse rejects it',
});

// ---- Layout promptparse tolerates too ---------------------------------------------

add({ name: 'bank/layout/no-tag-51', payload: seal(tlv('00', bankSub('004', 'ABC123'))), want: 'bank' });
add({ name: 'bank/layout/51-first', payload: seal(tlv('51', 'TH') + tlv('00', bankSub('004', 'ABC123'))), want: 'bank' });
add({
  name: 'bank/layout/subtags-reordered',
  payload: seal(tlv('00', tlv('02', 'ABC123') + tlv('00', '000001') + tlv('01', '004')) + tlv('51', 'TH')), want: 'bank',
});
add({ name: 'bank/layout/extra-top-tag', payload: seal(bankBody('004', 'ABC123') + tlv('62', 'X1')), want: 'bank' });
add({ name: 'bank/layout/extra-sub-tag', payload: seal(tlv('00', bankSub('004', 'ABC123') + tlv('05', 'extra')) + tlv('51', 'TH')), want: 'bank' });
add({ name: 'wallet/layout/extra-top-tag', payload: seal(walletBody('P2P', 'TM1', '01012025') + tlv('51', 'TH'), false), want: 'wallet' });
add({
  name: 'wallet/layout/subtags-reordered',
  payload: seal(tlv('00', tlv('04', '01012025') + tlv('03', 'TM1') + tlv('02', 'P2P') + tlv('01', '01') + tlv('00', '01')), false), want: 'wallet',
});

// ---- Malformed: both refuse ----------------------------------------------------------

add({ name: 'bad/empty', payload: '', want: 'none' });
add({ name: 'bad/blank', payload: '   ', want: 'none' });
add({ name: 'bad/bank-wrong-crc', payload: cut(kbank) + '9104' + hex(crcOf(cut(kbank) + '9104') ^ 0x0100, 4), want: 'none' });
add({ name: 'bad/wallet-wrong-crc', payload: cut(tmDoc) + '9104' + hex(crcOf(cut(tmDoc) + '9104') ^ 0x8000, 4, false), want: 'none' });
add({ name: 'bad/bank-crc-dropped-nonzero-digit', payload: cut(ppTest) + '9103' + crcHex(ppTest).slice(1), want: 'none' });
add({ name: 'bad/bank-crc-missing', payload: cut(kbank), want: 'none' });
add({ name: 'bad/bank-crc-empty', payload: cut(kbank) + '9104', want: 'none' });
add({ name: 'bad/bank-truncated', payload: kbank.slice(0, 30), want: 'none' });
add({ name: 'bad/bank-trailing-after-crc', payload: kbank + '00', want: 'none' });
add({ name: 'bad/bank-api-type', payload: seal(tlv('00', tlv('00', '000002') + tlv('01', '004') + tlv('02', 'ABC123')) + tlv('51', 'TH')), want: 'none' });
add({ name: 'bad/bank-no-api-type', payload: seal(tlv('00', tlv('01', '004') + tlv('02', 'ABC123')) + tlv('51', 'TH')), want: 'none' });
add({ name: 'bad/bank-no-bank-code', payload: seal(tlv('00', tlv('00', '000001') + tlv('02', 'ABC123')) + tlv('51', 'TH')), want: 'none' });
add({ name: 'bad/bank-no-transref', payload: seal(tlv('00', tlv('00', '000001') + tlv('01', '004')) + tlv('51', 'TH')), want: 'none' });
add({ name: 'bad/bank-empty-subtag', payload: seal(tlv('00', bankSub('004', 'ABC123') + '0500') + tlv('51', 'TH')), want: 'none' });
add({ name: 'bad/bank-no-tag-00', payload: seal(tlv('51', 'TH')), want: 'none' });
add({ name: 'bad/wallet-v0', payload: seal(tlv('00', walletSub('P2P', 'TM1', '01012025', '02', '02')), false), want: 'none' });
add({ name: 'bad/promptpay-qr', payload: pp.generate.anyId({ type: 'MSISDN', target: '0812223333' }), want: 'none' });
add({ name: 'bad/not-digits', payload: 'AAAA0000', want: 'none' });

// ---- Malformed: promptparse accepts, slip refuses --------------------------------------

const fix = (body) => seal(body); // a correct CRC, so only the structure is wrong
add({
  name: 'bad/pp/bank-code-letters', payload: fix(bankBody('0A4', 'ABC123')), want: 'none',
  deviation: 'promptparse accepts any sending bank; slip wants exactly 3 digits',
});
add({
  name: 'bad/pp/bank-country', payload: fix(tlv('00', bankSub('004', 'ABC123')) + tlv('51', 'LA')), want: 'none',
  deviation: 'promptparse ignores tag 51; slip wants TH when it is present',
});
add({
  name: 'bad/pp/garbage-before-crc', payload: fix(bankBody('004', 'ABC123') + 'XYZ'), want: 'none',
  deviation: 'promptparse checks only the last 4 characters against the CRC of the rest; slip wants the lengths to add up',
});
// lengthBy changes the length of the leading tag 00 by d, leaving its bytes.
const lengthBy = (body, d) => body.replace(/^00(\d\d)/, (_, n) => '00' + String(Number(n) + d).padStart(2, '0'));
add({ name: 'bad/bank-top-length-short', payload: fix(lengthBy(bankBody('004', 'ABC123'), -1)), want: 'none' });
add({ name: 'bad/bank-top-length-long', payload: fix(lengthBy(bankBody('004', 'ABC123'), +1)), want: 'none' });
add({
  name: 'bad/pp/crc-tag-63', payload: pp.withCrcTag(bankBody('004', 'ABC123'), '63'), want: 'none',
  deviation: 'promptparse does not check which tag holds the CRC; slip wants tag 91 last',
});
add({
  name: 'bad/pp/duplicate-transref', payload: fix(tlv('00', bankSub('004', 'ABC123') + tlv('02', 'EVIL99')) + tlv('51', 'TH')), want: 'none',
  deviation: 'promptparse takes the first of two sub-tags 02; slip refuses the ambiguity',
});
add({
  name: 'bad/pp/duplicate-tag-00', payload: fix(bankBody('004', 'ABC123') + tlv('00', bankSub('004', 'EVIL99'))), want: 'none',
  deviation: 'promptparse takes the first of two tags 00; slip refuses the ambiguity',
});
add({
  name: 'bad/pp/empty-top-tag', payload: fix(bankBody('004', 'ABC123') + '6200'), want: 'none',
  deviation: 'promptparse accepts a top-level tag of length 00; EMVCo lengths are 01-99 and slip refuses it',
});
add({
  name: 'bad/pp/sub-length-not-digits', payload: fix(tlv('00', tlv('00', '000001') + '01 3004' + tlv('02', 'ABC123')) + tlv('51', 'TH')), want: 'none',
  deviation: 'promptparse reads lengths with parseInt, which skips a leading space; slip wants 2 digits',
});
add({
  name: 'bad/pp/wallet-only-v0', payload: seal(tlv('00', walletSub('P2P', 'TM1', '01012025', '01', '02')), false), want: 'none',
  deviation: 'promptparse accepts when either sub-tag 00 or 01 is 01 (&& for ||); slip wants both',
});
add({
  name: 'bad/pp/wallet-only-v1', payload: seal(tlv('00', walletSub('P2P', 'TM1', '01012025', '02', '01')), false), want: 'none',
  deviation: 'promptparse accepts when either sub-tag 00 or 01 is 01 (&& for ||); slip wants both',
});
add({
  name: 'bad/pp/wallet-no-txid', payload: seal(tlv('00', tlv('00', '01') + tlv('01', '01') + tlv('02', 'P2P') + tlv('04', '01012025')), false), want: 'none',
  deviation: 'promptparse does not require the transaction id',
});
add({
  name: 'bad/pp/wallet-no-date', payload: seal(tlv('00', tlv('00', '01') + tlv('01', '01') + tlv('02', 'P2P') + tlv('03', 'TM1')), false), want: 'none',
  deviation: 'promptparse does not require the date',
});
add({
  name: 'bad/pp/wallet-no-event', payload: seal(tlv('00', tlv('00', '01') + tlv('01', '01') + tlv('03', 'TM1') + tlv('04', '01012025')), false), want: 'none',
  deviation: 'promptparse does not require the event type',
});
add({
  name: 'bad/pp/wallet-short-date', payload: seal(tlv('00', walletSub('P2P', 'TM1', '1012025')), false), want: 'none',
  deviation: 'promptparse does not check the date; slip wants 8 digits',
});
add({
  name: 'bad/pp/wallet-month-13', payload: seal(tlv('00', walletSub('P2P', 'TM1', '01132025')), false), want: 'none',
  deviation: 'promptparse does not check the date',
});
add({
  name: 'bad/pp/non-ascii', payload: fix(bankBody('004', 'ABC123') + tlv('62', 'é')), want: 'none',
  deviation: 'promptparse counts UTF-16 units; slip accepts only printable ASCII, so lengths cannot mean two things',
});

process.stdout.write(JSON.stringify({
  comment: 'Generated by gen.mjs from promptparse; do not edit. See gen.mjs for how to regenerate.',
  promptparse: ppVersion,
  vectors,
}, null, 1) + '\n');
