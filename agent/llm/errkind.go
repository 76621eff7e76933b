package llm

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
)

// ErrorKind is what went wrong with a model call, in terms a person can act on: the agent
// shows the chat a summary of it (ModelError.SafeSummary) and the log gets the whole error.
type ErrorKind int

const (
	// KindUnknown is a failure none of the other kinds describes.
	KindUnknown ErrorKind = iota
	// KindRefused: nothing listens at the endpoint's address.
	KindRefused
	// KindDNS: the endpoint's host name does not resolve.
	KindDNS
	// KindTimeout: the endpoint did not answer in time.
	KindTimeout
	// KindTLS: the TLS handshake failed (a certificate, or https spoken to an http server).
	KindTLS
	// KindConnection: the connection closed or broke before the reply was complete.
	KindConnection
	// KindUnauthorized: the endpoint refused the API key (401) or its use (403).
	KindUnauthorized
	// KindNotFound: the endpoint answered 404, a wrong model name or base URL.
	KindNotFound
	// KindRateLimited: the endpoint kept answering 429.
	KindRateLimited
	// KindServer: the endpoint answered with a 5xx.
	KindServer
	// KindRejected: the endpoint answered with another 4xx.
	KindRejected
	// KindBadReply: the endpoint answered 2xx with something that is not a chat completion.
	KindBadReply
)

var kindNames = [...]string{"unknown", "connection refused", "dns", "timeout", "tls", "connection closed",
	"unauthorized", "not found", "rate limited", "server error", "rejected", "bad reply"}

// String is the kind's name for logs and metrics.
func (k ErrorKind) String() string {
	if k < 0 || int(k) >= len(kindNames) {
		return "unknown"
	}
	return kindNames[k]
}

// ModelError is the error Complete returns after its last attempt: the kind of failure, the
// HTTP status when the endpoint answered, and the error itself, which names no API key. Its
// message is the inner error's, so logs read as before.
type ModelError struct {
	Kind ErrorKind
	// Status is the endpoint's HTTP status, zero when it did not answer.
	Status int
	Err    error
}

func (e *ModelError) Error() string { return e.Err.Error() }
func (e *ModelError) Unwrap() error { return e.Err }

// SafeSummary says what failed and what to check, for a person in a chat. It holds no URL,
// host, key or raw error text, which go to the log only.
func (e *ModelError) SafeSummary() string {
	switch e.Kind {
	case KindRefused:
		return "connection refused: nothing listens at the model endpoint's address; check that the model server is running and [llm] base_url"
	case KindDNS:
		return "DNS failure: the model endpoint's host name does not resolve; check [llm] base_url"
	case KindTimeout:
		return "timed out: the model endpoint did not answer in time; check that the server is up and not overloaded, or raise [llm] timeout"
	case KindTLS:
		return "TLS failure: the secure connection to the model endpoint failed; check http or https in [llm] base_url and the server's certificate"
	case KindConnection:
		return "connection closed: the model endpoint dropped the connection before its reply was complete; check the model server's logs"
	case KindUnauthorized:
		if e.Status == http.StatusForbidden {
			return "403 forbidden: the API key may not use this model; check the key's permissions and [llm] model"
		}
		return "401 unauthorized: the endpoint refused the API key; check OPENAI_API_KEY or [llm] api_key"
	case KindNotFound:
		return "404 model not found: check [llm] model, and that [llm] base_url is the API's root (often ending in /v1)"
	case KindRateLimited:
		return "rate limited: the endpoint kept answering 429; wait, or check the account's limits"
	case KindServer:
		return fmt.Sprintf("the model endpoint failed (HTTP %d); check the model server", e.Status)
	case KindRejected:
		return fmt.Sprintf("the model endpoint rejected the request (HTTP %d); check [llm] model and the settings in [llm]", e.Status)
	case KindBadReply:
		return "the endpoint's reply is not a chat completion; check that [llm] base_url points at an OpenAI-compatible API"
	}
	return "request failed; the log has the details"
}

// explain wraps the error of a failed call in a *ModelError saying its kind. status is the
// HTTP status the last attempt got, zero when none.
func explain(err error, status int) error {
	var se *StatusError
	if errors.As(err, &se) {
		status = se.StatusCode
	}
	return &ModelError{Kind: errorKind(err, status), Status: status, Err: err}
}

// errorKind classifies a failed call. It reads the error's chain, and its text only where a
// redacted error (retry.go) hides the chain from errors.As.
func errorKind(err error, status int) ErrorKind {
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return KindUnauthorized
	case status == http.StatusNotFound:
		return KindNotFound
	case status == http.StatusTooManyRequests:
		return KindRateLimited
	case status >= 500:
		return KindServer
	case status >= 400:
		return KindRejected
	}
	var (
		dnsErr  *net.DNSError
		netErr  net.Error
		certErr *tls.CertificateVerificationError
		recErr  tls.RecordHeaderError
		authErr x509.UnknownAuthorityError
		hostErr x509.HostnameError
		invErr  x509.CertificateInvalidError
	)
	msg := err.Error()
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return KindRefused
	case errors.As(err, &dnsErr) || strings.Contains(msg, "no such host"):
		return KindDNS
	case errors.Is(err, errAttemptTimeout), errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return KindTimeout
	case errors.As(err, &certErr), errors.As(err, &recErr), errors.As(err, &authErr), errors.As(err, &hostErr), errors.As(err, &invErr),
		strings.Contains(msg, "tls: "), strings.Contains(msg, "x509: "), strings.Contains(msg, "HTTP response to HTTPS client"):
		return KindTLS
	case errors.Is(err, errIncompleteStream), strings.Contains(msg, "the connection broke"):
		return KindConnection
	case status >= 200 && status < 300:
		// The endpoint answered, and its body did not decode: an unexpected EOF here is the
		// JSON decoder's, not the connection's.
		return KindBadReply
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.EPIPE):
		return KindConnection
	}
	return KindUnknown
}
