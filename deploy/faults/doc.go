// Package faults holds the fault matrix (make test-faults): the whole
// platform as real processes under a steady load of sync verifications and
// async jobs, one fault at a time (kill -9 of each tier, the broker and
// ClickHouse stopped, core slowed down, core's disk full), and for each what
// clients saw and what was lost. Its test is built only with the faults
// tag, so make test does not run it twice in CI.
package faults
