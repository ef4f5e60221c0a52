// Package bus is codapipe's message bus on NATS JetStream: the stream and
// subject topology, publishing with de-duplication and claim checks for
// large bodies, and a consumer runner with ack / retry / dead-letter
// semantics, in-progress heartbeats, graceful shutdown and a drain mode.
//
// By default Open starts an embedded NATS server (JetStream on, file store
// under the data directory, loopback only), so one command works on a fresh
// machine; given a URL it connects to an external server or cluster.
//
// Subjects are "coda.<kind>.<app>" (see Subject); docs/contracts.md lists
// the streams, subjects and durable consumers.
package bus
