package pgstore

// SweepJobs is the advisory lock of the jobs' sweep.
const SweepJobs = sweepJobs
