// Package faults holds the fault matrix (make test-faults): the whole
// platform as real processes, with proxies the test controls between the
// edge and core, the usage tier and ClickHouse, and the dispatcher and the
// webhook receiver (package tcpproxy), under a steady load that moves money
// (signed, wallet, image and v1 verifications, cross-branch duplicates, a
// branch at its quota limit while b2b changes move it, async singles and
// batches). Each row applies a fault (kill -9 of each tier, of the broker
// and of ClickHouse, a frozen broker, a slowed core, a full disk, a
// partition, a delay or resets on a link, two at once) and then asks core
// slip by slip what it charged. A second stack runs two cores on
// PostgreSQL, a primary and its synchronous standby run by Patroni, each
// core through proxies of its own to each member, under rows of its own (a
// core killed, the primary killed and replaced, a core cut off PostgreSQL,
// PostgreSQL restarted, a rolling restart of the cores). Its tests are
// built only with the faults tag, so make test does not run them twice in
// CI; README.md holds their tables.
package faults
