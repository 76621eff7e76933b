// Package discordfake is Discord at the protocol level, for tests of code that talks to it
// through discordgo: the REST routes loopbot uses, served on a local HTTP server, and a
// gateway websocket on the same server.
//
// The REST side keeps the messages, channels and threads it is asked to create, so a test
// reads back what a bot showed, and it logs every request with its decoded body and the
// time it arrived. Interaction tokens are registered with Interaction and die fifteen
// minutes later on the fake's own clock (Advance), as Discord's do; an interaction is
// acknowledged once, and a second callback is refused as Discord refuses it.
//
// GET /channels/{id}/messages serves what a test scripted with AddHistory (real message
// objects, say), newest first, honouring before and limit as Discord does; the request log
// keeps each request's query.
//
// Faults are injected per route (Inject, Fail, RateLimit): an error status with its body
// and headers for the next matching requests, such as a 429 with Discord's retry_after
// body and X-RateLimit-* and Retry-After headers, so a test can check that a client waits
// as long as it was told to.
//
// The gateway side says Hello, answers Identify with READY and Resume with RESUMED, acks
// heartbeats, and sends what a test dispatches (INTERACTION_CREATE, MESSAGE_CREATE). It keeps
// the session's events: DropGateway cuts the socket without a close frame, as a network
// failure does; events dispatched while the client is away are held, and a Resume replays
// every event after the sequence number the client names, so delivery is at least once, as
// Discord's is.
//
// Nothing here needs a *testing.T: the constructor returns an error, waits take a context,
// and what the fake found wrong in what it was sent (a body that is not JSON, an unexpected
// gateway opcode) is reported by Err. The package is imported by the adapter's tests and by
// cmd/loopbot's fault tests, which run the real binary against it.
package discordfake
