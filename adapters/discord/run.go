package discord

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/loopbot/loopbot/bot"
)

// maxTimestampSkew is how far an HTTP interaction's timestamp may be from the clock; older
// requests are replays.
const maxTimestampSkew = 5 * time.Minute

// maxInteractionBody bounds an HTTP interaction's body.
const maxInteractionBody = 1 << 20

// Run registers the commands and then, in gateway mode, keeps a gateway connection (which
// discordgo reconnects and resumes after a drop), or in HTTP mode serves the interactions
// endpoint on ListenAddr, handing events to h until ctx ends. It then finishes the work on
// events already acknowledged and returns. An Adapter runs once.
func (a *Adapter) Run(ctx context.Context, h bot.Handler) error {
	a.mu.Lock()
	if a.running {
		a.mu.Unlock()
		return errors.New("run discord: already running")
	}
	a.running = true
	a.mu.Unlock()
	defer a.shutdown()
	if err := a.registerCommands(ctx); err != nil {
		return fmt.Errorf("run discord: %w", err)
	}
	if a.cfg.Mode == ModeHTTP {
		return a.serveHTTP(ctx, h)
	}
	return a.runGateway(ctx, h)
}

// gatewayRole is the role of the replica that holds the gateway connection.
const gatewayRole = "discord-gateway"

// leading is a Handler that runs what only one replica may run (bot.Bot.Lead).
type leading interface {
	Lead(ctx context.Context, role string, fn func(ctx context.Context) error) error
}

// runGateway holds the gateway connection. With replicas sharing a store, one of them holds
// it, the leader of gatewayRole, so that each message is received once: Discord sends
// every event to every connection of an unsharded bot. Another replica connects when the
// leader stops or loses the role.
func (a *Adapter) runGateway(ctx context.Context, h bot.Handler) error {
	if l, ok := h.(leading); ok {
		return l.Lead(ctx, gatewayRole, func(ctx context.Context) error { return a.connect(ctx, h) })
	}
	return a.connect(ctx, h)
}

// connect holds one gateway connection until ctx ends. The first uses the adapter's
// session; a later one (this replica leads the gateway again after it lost the role) a new
// session, which identifies afresh: the old gateway session is stale, since another
// replica's connection got the events meanwhile, and resuming it would replay them.
func (a *Adapter) connect(ctx context.Context, h bot.Handler) error {
	gw := a.s
	if a.gatewayUsed.Swap(true) {
		var err error
		if gw, err = a.newSession(); err != nil {
			return fmt.Errorf("run discord: %w", err)
		}
	}
	remove := gw.AddHandler(func(_ *discordgo.Session, e *discordgo.Event) { a.onGatewayEvent(ctx, h, e) })
	defer remove()
	// Open takes no context; it is bounded by the HTTP client's and the dialer's timeouts.
	if err := gw.Open(); err != nil {
		return fmt.Errorf("run discord: connect to gateway: %w", err)
	}
	<-ctx.Done()
	if err := gw.Close(); err != nil {
		a.log.Warn("discord: close gateway", "err", err)
	}
	return nil
}

func (a *Adapter) serveHTTP(ctx context.Context, h bot.Handler) error {
	ln, err := net.Listen("tcp", a.cfg.ListenAddr)
	if err != nil {
		return fmt.Errorf("run discord: %w", err)
	}
	a.log.Info("discord: serving interactions", "addr", ln.Addr().String())
	srv := &http.Server{Handler: a.InteractionsHandler(ctx, h), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("run discord: serve interactions: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("run discord: stop serving: %w", err)
	}
	return nil
}

// InteractionsHandler is the HTTP interactions endpoint (the "Interactions Endpoint URL" in
// the developer portal). It answers 401 to every request whose Ed25519 signature over
// timestamp+body does not verify or whose timestamp is more than five minutes off (Discord
// probes with bad signatures and drops the URL if one is accepted), PONG to PING, and the
// deferred response to commands and buttons, as the HTTP response itself; the rest of an
// interaction's work runs after the response, with ctx's values but not its end. Run serves
// it in HTTP mode; a caller that mounts it on its own server instead does not call Run, and
// calls Close when it stops serving.
func (a *Adapter) InteractionsHandler(ctx context.Context, h bot.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxInteractionBody+1))
		if err != nil || len(body) > maxInteractionBody {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		if !verifySignature(a.pubKey, r.Header.Get("X-Signature-Ed25519"), r.Header.Get("X-Signature-Timestamp"), body, a.now()) {
			http.Error(w, "invalid request signature", http.StatusUnauthorized)
			return
		}
		in, err := decodeInteraction(body)
		if err != nil {
			a.log.Warn("discord: bad interaction", "err", err)
			http.Error(w, "unsupported interaction", http.StatusBadRequest)
			return
		}
		resp, err := json.Marshal(deferredResponse(in))
		if err != nil {
			http.Error(w, "encode response", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if _, err := w.Write(resp); err != nil {
			return
		}
		if in.ping {
			return
		}
		// The deferred response must be on its way before its message is edited.
		_ = http.NewResponseController(w).Flush()
		a.track(func() {
			ectx, cancel := eventContext(ctx)
			defer cancel()
			a.afterAck(ectx, h, in)
		})
	})
}

// Close waits for the work on interactions already acknowledged and stops taking new ones.
// Run does this itself; Close is for an InteractionsHandler mounted on another server.
func (a *Adapter) Close() { a.shutdown() }

// verifySignature checks Discord's signature of an HTTP interaction: Ed25519 over the
// timestamp followed by the body, with a timestamp within maxTimestampSkew of now.
func verifySignature(key ed25519.PublicKey, sigHex, timestamp string, body []byte, now time.Time) bool {
	if len(key) != ed25519.PublicKeySize {
		return false
	}
	sig, err := hex.DecodeString(sigHex)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return false
	}
	sec, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return false
	}
	if d := now.Sub(time.Unix(sec, 0)); d > maxTimestampSkew || d < -maxTimestampSkew {
		return false
	}
	msg := make([]byte, 0, len(timestamp)+len(body))
	msg = append(msg, timestamp...)
	msg = append(msg, body...)
	return ed25519.Verify(key, msg, sig)
}
