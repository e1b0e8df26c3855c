// Package wire converts between the engine's Go types and the messages of
// the network API (package docketv1), for the server and the client alike:
// requests and replies, the engine's sentinel errors and the connect codes
// and error details that carry them, and the JSON codec that writes
// payloads as JSON values rather than base64. A conversion of what a
// client sent refuses malformed input (a duration out of range, an empty
// op) with an error wrapping engine.ErrInvalid; everything the engine
// checks itself is left to the engine.
package wire
