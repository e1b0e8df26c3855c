// Package transport measures what carrying one call costs on each network
// path a docket client could take to its server, with the handler doing
// no engine work: the floor under any server built on that path. It has
// benchmarks only (transport_test.go); bench/README.md ("Transport floor")
// has the commands and the figures.
//
// Every path carries the same messages with the same codec: a
// docketv1.EnqueueRequest (namespace, queue, a task with a 100-byte JSON
// payload and a kind, about 150 bytes encoded) answered by a
// docketv1.EnqueueResponse. The call's id rides in the task's priority, a
// varint field, where a session's envelope would carry it; the answer
// carries it back as the enqueued id. Each message is encoded and decoded
// with google.golang.org/protobuf on both sides, and every decode makes a
// fresh message, as a server that hands calls on must.
//
// The paths:
//
//	tcp      length-prefixed frames on a TCP connection: a frame is the
//	         uvarint length of a message and the message. Each side has
//	         one goroutine that reads and one that writes; the writer
//	         encodes into a bufio.Writer and flushes only when its queue is
//	         empty, so the calls that arrive while it writes leave in one
//	         write (write coalescing). tcp-inline has no writing
//	         goroutines: each side writes from the goroutine that has the
//	         message. tcp-hybrid writes a client's call from its caller
//	         when no other call is in flight, through the writing goroutine
//	         otherwise.
//	stream   a connect-go bidirectional stream ("/docket.bench.v1.Echo/Session")
//	         over HTTP/2 without TLS (h2c, net/http's own), connect's
//	         protobuf codec, a call per message; each side reads in one
//	         goroutine and sends in another. stream-coalesced
//	         ("/docket.bench.v1.Echo/Batches") sends in each message every
//	         call queued (an EnqueueEachRequest) and every answer queued
//	         (an EnqueueEachResponse).
//	unary    a connect-go unary call ("/docket.bench.v1.Echo/Call") over
//	         HTTP/1.1, one call per request, as the client calls today.
//
// Each is measured with one call in flight ("lone": a round trip) and
// pipelined on one connection or stream (1,024 calls in flight, answered
// by id in any order); unary, which cannot pipeline, with 16 and 1,024
// concurrent callers. The "batched" servers hand what they read on in
// batches, as a server that commits everything in flight together would:
// the reader takes every call that has arrived before it hands them on
// (on tcp, every whole frame already in its read buffer; on the stream,
// every message its reading goroutine has queued), and the stage that
// takes a batch answers it in reverse, out of order.
package transport
