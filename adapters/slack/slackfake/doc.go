// Package slackfake is Slack at the protocol level, for tests and benchmarks of code that
// talks to it through slack-go: a Web API over HTTP and a Socket Mode websocket on one local
// server.
//
// The Web API answers the methods loopbot uses (auth.test, apps.connections.open,
// chat.postMessage, chat.update, chat.postEphemeral, conversations.replies and users.info
// with what SetReplies and SetUser gave them, the agent surfaces assistant.threads.setStatus
// and assistant.threads.setSuggestedPrompts, and a response_url endpoint) and records
// every call with its form values, the moment it arrived and the status it was answered with
// (Calls). Any other method answers unknown_method. Failures are injected per method with
// FailNext: a 429 with Retry-After, a 500, or an API error such as channel_not_found, for the
// next n calls.
//
// Socket Mode says hello on every connection, pings every second (slack-go reconnects when
// it hears no ping for 30 seconds) and reads acknowledgements back by envelope ID (Acks),
// with the moment the acknowledged delivery was written and the moment its ack was read. An
// envelope that is not acknowledged when its connection ends is delivered again on the next
// connection, with retry_attempt counting up, as Slack does. DropConnection closes the socket
// abruptly, SendDisconnect sends Slack's disconnect message (refresh_requested, ...), and
// DropConnectionOnAck loses an acknowledgement together with its connection, so that a
// delivery the client has already handled is delivered again.
//
// Nothing here needs a *testing.T: New returns an error, the waits take a context, and the
// records are snapshots, so a benchmark can use the fake as well as a test. The payload
// builders (MentionCallback, MessageCallback, ClickPayload) make Events API and
// interactivity payloads in the shapes Slack sends, and Sign makes the signature headers of
// Slack's HTTP requests.
package slackfake
