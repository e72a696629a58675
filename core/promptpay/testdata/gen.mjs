// gen.mjs writes the golden vectors of package promptpay (vectors.json) from
// promptparse, the reference implementation, and cross-checks them with
// promptpay-qr, a second generator written independently.
//
// Regenerate from the repository root (needs node and the npm registry; CI
// needs neither, as vectors.json is committed):
//
//   mkdir -p /tmp/pp2 && (cd /tmp/pp2 && npm init -y && npm install promptparse@1.6.0 promptpay-qr@0.5.0) &&
//     PROMPTPARSE_PREFIX=/tmp/pp2 node core/promptpay/testdata/gen.mjs > core/promptpay/testdata/vectors.json
//
// Each vector holds a target as a user might type it, an optional amount, the
// kind package promptpay must classify it as, and:
//
//   - promptparse: what is handed to generate.anyId ({type, target}) and the
//     payload it returns. Package promptpay must reproduce it byte for byte.
//     anyId takes a proxy type and does no clean-up of its own, so this script
//     strips the spaces, dashes and "+" a user types; the phone number's
//     "0" -> "0066" rewrite is left to anyId.
//   - promptpayQr: the payload promptpay-qr returns for the raw typed target
//     (it strips non-digits itself and guesses the kind from the length), and
//     whether it is byte-identical to promptparse's ("same") or carries the
//     same data objects in another order ("sameTags").
//
// promptpay-qr 0.5.0 and promptparse 1.6.0 disagree on every input: promptparse
// writes tag 53 (currency) before tag 58 (country), promptpay-qr writes 58
// before 53, so the bytes and hence the CRC differ. Both orders are valid
// EMVCo (tags 53 and 58 are not ordered by the spec) and bank apps read both;
// the service follows promptparse. The script fails if the two ever differ in
// anything but that order, and records the CRC-free tag list so the Go test
// can check the same.

import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import path from 'node:path';

const prefix = path.resolve(process.env.PROMPTPARSE_PREFIX ?? '.');
const require = createRequire(path.join(prefix, 'gen.cjs'));
const pp = require('promptparse');
const promptpayQr = require('promptpay-qr');
const version = (name) =>
  JSON.parse(readFileSync(path.join(prefix, 'node_modules', name, 'package.json'), 'utf8')).version;

// anyIdInput maps a typed target to promptparse's generate.anyId arguments.
const anyIdInput = (kind, typed) => {
  const digits = typed.replace(/[\s-]/g, '').replace(/^\+/, '');
  const type = { phone: 'MSISDN', national_id: 'NATID', ewallet: 'EWALLETID' }[kind];
  return { type, target: digits };
};

// tags lists the top-level data objects of a payload, CRC tag 63 left out,
// sorted by tag id, as "id=value" strings.
const tags = (payload) => {
  const out = [];
  for (const t of pp.decode(payload)) {
    if (t.id !== '63') out.push(`${t.id}=${t.value}`);
  }
  return out.sort();
};

const targets = [
  ['phone/local', 'phone', '0812345678'],
  ['phone/local-dashes', 'phone', '081-234-5678'],
  ['phone/local-spaces', 'phone', '081 234 5678'],
  ['phone/plus66', 'phone', '+66812345678'],
  ['phone/plus66-spaces', 'phone', '+66 81 234 5678'],
  ['phone/plus66-dashes', 'phone', '+66-81-234-5678'],
  ['phone/66', 'phone', '66812345678'],
  ['phone/06', 'phone', '0612345678'],
  ['phone/09', 'phone', '0999999999'],
  ['phone/promptparse-readme', 'phone', '0812223333'],
  ['national_id/plain', 'national_id', '1234567890121'],
  ['national_id/dashes', 'national_id', '1-2345-67890-12-1'],
  ['national_id/spaces', 'national_id', '1 2345 67890 12 1'],
  ['tax_id/juristic', 'national_id', '0105550123451'],
  ['tax_id/juristic-dashes', 'national_id', '0-1055-50123-45-1'],
  ['ewallet/plain', 'ewallet', '004999000288505'],
  ['ewallet/spaces', 'ewallet', '004 999 000 288 505'],
  ['ewallet/truemoney', 'ewallet', '140000812345678'],
  ['national_id/bad-check-digit', 'national_id', '1234567890123'],
];

const amounts = [null, 1, 0.5, 100.25, 100.5, 1234567.89, 0.01, 0.1, 0.29, 1.1, 9999999999.99];

const vectors = [];
for (const [name, kind, target] of targets) {
  // Every target without an amount; the first of each kind with every amount;
  // the others with two amounts, which is enough to show their typing does
  // not change the payload.
  const first = !vectors.some((v) => v.kind === kind);
  const list = first ? amounts : [null, 100.25];
  for (const amount of list) {
    const input = anyIdInput(kind, target);
    const ppPayload = pp.generate.anyId(amount === null ? input : { ...input, amount });
    const qrPayload = promptpayQr(target, amount === null ? {} : { amount });

    const parsed = pp.parse(ppPayload, true);
    if (!parsed) throw new Error(`${name}: promptparse cannot parse its own ${ppPayload}`);
    if (!pp.parse(qrPayload, true)) throw new Error(`${name}: promptparse rejects promptpay-qr's ${qrPayload}`);
    const sameTags = JSON.stringify(tags(ppPayload)) === JSON.stringify(tags(qrPayload));
    if (!sameTags) {
      throw new Error(`${name}: promptparse ${ppPayload} and promptpay-qr ${qrPayload} hold different data`);
    }

    vectors.push({
      name: amount === null ? `${name}/static` : `${name}/amount-${amount}`,
      target,
      amount,
      kind,
      promptparse: { type: input.type, target: input.target, payload: ppPayload },
      promptpayQr: { payload: qrPayload, same: qrPayload === ppPayload, sameTags },
      tags: tags(ppPayload),
    });
  }
}

process.stdout.write(
  JSON.stringify(
    {
      comment: 'Generated by gen.mjs from promptparse and promptpay-qr; do not edit. See gen.mjs for how to regenerate.',
      promptparse: version('promptparse'),
      promptpayQr: version('promptpay-qr'),
      vectors,
    },
    null,
    1,
  ) + '\n',
);
