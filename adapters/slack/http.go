package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/slack-go/slack"

	"github.com/loopbot/loopbot/bot"
)

// Paths of the HTTP mode endpoints, to enter in the app's settings (Event Subscriptions,
// Interactivity and the /loopbot command) behind https://your-host.
const (
	PathEvents       = "/slack/events"
	PathInteractions = "/slack/interactions"
	PathCommands     = "/slack/commands"
)

// maxBody bounds a request body; Slack's payloads are far smaller.
const maxBody = 1 << 20

// Serve is Run in HTTP mode on a listener the caller opened: it serves the events,
// interactivity and slash command endpoints until ctx ends, then stops taking requests,
// handles what it has acknowledged and returns nil.
func (a *Adapter) Serve(ctx context.Context, ln net.Listener, h bot.Handler) error {
	if a.cfg.SigningSecret == "" {
		ln.Close()
		return errors.New("slack http mode: SigningSecret is not set")
	}
	self, err := a.whoami(ctx)
	if err != nil {
		ln.Close()
		return fmt.Errorf("slack http mode: %w", err)
	}
	s := a.newSession(ctx, h, self)
	srv := &http.Server{
		Handler:           s.routes(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
	case err := <-served:
		s.drain()
		return fmt.Errorf("slack http mode: %w", err)
	}
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.cfg.DrainTimeout)
	defer cancel()
	err = srv.Shutdown(shutCtx)
	<-served
	// Every handler has returned, so nothing enqueues any more.
	s.drain()
	if err != nil {
		return fmt.Errorf("slack http mode: shutdown: %w", err)
	}
	return nil
}

// routes is the HTTP mode handler: one endpoint per kind of delivery, each verified with
// the signing secret on the raw body before anything is decoded.
func (s *session) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+PathEvents, s.verified(s.serveEvent))
	mux.HandleFunc("POST "+PathInteractions, s.verified(s.serveInteraction))
	mux.HandleFunc("POST "+PathCommands, s.verified(s.serveCommand))
	return mux
}

// verified reads the body and checks Slack's signature over it (HMAC-SHA256 with the
// signing secret, compared in constant time, timestamp within five minutes) before next
// sees it. Anything else is 401 and is not looked at.
func (s *session) verified(next func(w http.ResponseWriter, body []byte)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err != nil {
			http.Error(w, "request body too large or unreadable", http.StatusRequestEntityTooLarge)
			return
		}
		sv, err := slack.NewSecretsVerifier(r.Header, s.a.cfg.SigningSecret)
		if err == nil {
			_, _ = sv.Write(body)
			err = sv.Ensure()
		}
		if err != nil {
			s.a.log.Warn("slack: request with a bad signature refused", "path", r.URL.Path, "remote", r.RemoteAddr, "err", logSafe(err))
			http.Error(w, "invalid signature", http.StatusUnauthorized)
			return
		}
		next(w, body)
	}
}

// busy answers a delivery the workers have no room for. It is not acknowledged, so Slack
// delivers it again later.
func busy(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "1")
	http.Error(w, "busy", http.StatusServiceUnavailable)
}

func (s *session) serveEvent(w http.ResponseWriter, body []byte) {
	var cb callback
	if err := json.Unmarshal(body, &cb); err == nil && cb.Type == "url_verification" {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"challenge": cb.Challenge})
		return
	}
	// A signed payload that cannot be decoded is acknowledged anyway: a retry would not
	// decode either.
	if j, ok := s.fromEvent(body); ok && !s.tryEnqueue(j) {
		busy(w)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (s *session) serveInteraction(w http.ResponseWriter, body []byte) {
	form, err := url.ParseQuery(string(body))
	if err != nil {
		s.a.log.Warn("slack: undecodable interaction acknowledged and dropped", "err", logSafe(err))
		w.WriteHeader(http.StatusOK)
		return
	}
	if j, ok := s.fromInteraction([]byte(form.Get("payload"))); ok && !s.tryEnqueue(j) {
		busy(w)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (s *session) serveCommand(w http.ResponseWriter, body []byte) {
	form, err := url.ParseQuery(string(body))
	if err != nil {
		s.a.log.Warn("slack: undecodable slash command acknowledged and dropped", "err", logSafe(err))
		w.WriteHeader(http.StatusOK)
		return
	}
	j, reply, ok := s.fromCommand(slashFromForm(form))
	if ok && !s.tryEnqueue(j) {
		busy(w)
		return
	}
	if reply != "" {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(ephemeral(reply))
		return
	}
	w.WriteHeader(http.StatusOK)
}
