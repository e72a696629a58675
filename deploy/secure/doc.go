// Package secure tests the platform with TLS and authentication on every
// Kafka and ClickHouse link: the dev broker speaking TLS only with one
// SCRAM user, ClickHouse's secure native port with a password, and every
// tier as its program, configured as an operator would (SLIP_KAFKA_TLS*,
// SLIP_KAFKA_SASL_*, SLIP_CLICKHOUSE_TLS*). It holds tests only.
package secure
