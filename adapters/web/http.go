package web

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/bot/text"
)

// The console's files, embedded as strings: they are written to responses as they lie in
// the binary, with no copy on the heap (embed.FS's ReadFile copies each file).
var (
	//go:embed static/index.html
	indexHTML string
	//go:embed static/app.js
	appJS string
	//go:embed static/app.css
	appCSS string
)

// maxBody bounds a POST body: a goal or a reply is a few kilobytes at most.
const maxBody = 64 << 10

// handleTimeout bounds the bot's handling of one submission.
const handleTimeout = 30 * time.Second

// cookieName holds the token in the browser once the person has logged in with ?token=.
const cookieName = "loopbot_token"

// csp allows the console's own files and nothing else: no inline script or style, no
// framing, no plugins.
const csp = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

var errClosed = errors.New("the console is shutting down")

// Run serves the console on Config.Addr until ctx ends, then shuts the server down and
// returns nil. Events go to h.
func (a *Adapter) Run(ctx context.Context, h bot.Handler) error {
	ln, err := net.Listen("tcp", a.cfg.Addr)
	if err != nil {
		return fmt.Errorf("web console listen: %w", err)
	}
	return a.Serve(ctx, ln, h)
}

// Serve is Run on a listener the caller opened (to learn the port of ":0", say). It refuses
// a listener beyond loopback when the console checks no credential, or when it has one
// shared token and the bot has approver rules that need to tell people apart.
func (a *Adapter) Serve(ctx context.Context, ln net.Listener, h bot.Handler) error {
	if tcp, ok := ln.Addr().(*net.TCPAddr); ok && !tcp.IP.IsLoopback() {
		var err error
		switch rules := needsIdentity(a.policy); {
		case !a.cfg.authenticates():
			err = fmt.Errorf("web console on %s: not a loopback address, so the console needs web users, trusted_proxies or token: refusing to serve it unprotected", ln.Addr())
		case a.auth.mode == modeSingle && len(rules) > 0:
			err = fmt.Errorf("web console on %s: exposed with one shared token, so it cannot tell people apart, and the bot's %s need it: configure [web.users] or web trusted_proxies",
				ln.Addr(), strings.Join(rules, ", "))
		}
		if err != nil {
			ln.Close()
			return err
		}
	}
	srv := &http.Server{
		Handler:           a.HTTPHandler(h),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	// Event streams never go idle, so Shutdown would wait for them until its deadline.
	srv.RegisterOnShutdown(a.closeStreams)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("web console: %w", err)
	case <-ctx.Done():
	}
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(shutCtx)
	<-served
	if err != nil {
		return fmt.Errorf("web console shutdown: %w", err)
	}
	return nil
}

// HTTPHandler is the console: its pages, its JSON API and its event stream, behind the
// token and origin checks. Events go to h.
func (a *Adapter) HTTPHandler(h bot.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", a.serveIndex)
	mux.HandleFunc("GET /app.js", serveStatic(appJS, "text/javascript; charset=utf-8"))
	mux.HandleFunc("GET /app.css", serveStatic(appCSS, "text/css; charset=utf-8"))
	mux.HandleFunc("GET /api/threads", a.serveThreads)
	mux.HandleFunc("GET /api/threads/{id}", a.serveThread)
	mux.HandleFunc("GET /api/events", a.serveEvents)
	mux.HandleFunc("GET /api/me", a.serveMe)
	mux.HandleFunc("GET /files/{run}/{path...}", a.serveFile)
	post := func(f func(http.ResponseWriter, *http.Request, bot.Handler, []byte)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if body, ok := readPost(w, r); ok {
				f(w, r, h, body)
			}
		}
	}
	mux.Handle("POST /api/threads", post(a.newThread))
	mux.Handle("POST /api/threads/{id}/messages", post(a.reply))
	mux.Handle("POST /api/actions", post(a.action))
	// Browsers say where a request comes from; a cross-origin POST is refused.
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusForbidden, "cross-origin request refused")
	}))
	return a.guard(cop.Handler(mux))
}

// guard sets the security headers on every response and lets a request through only when
// it knows who the request comes from (identity.go), which it puts in the request's
// context. On a single-person console with no token it lets through only loopback host
// names.
func (a *Adapter) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", csp)
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "no-referrer")
		if a.auth.mode == modeSingle && !a.auth.hasShared {
			// Without a credential, only the loopback names reach the console, so that a
			// web page cannot point a name of its own at 127.0.0.1 (DNS rebinding).
			host, _, err := net.SplitHostPort(r.Host)
			if err != nil {
				host = r.Host
			}
			if !isLoopbackHost(strings.Trim(host, "[]")) {
				writeError(w, http.StatusForbidden, "this console answers to localhost and loopback addresses only")
				return
			}
		}
		if tok := r.URL.Query().Get("token"); tok != "" && r.Method == http.MethodGet && r.URL.Path == "/" {
			if _, ok := a.auth.token(tok); !ok {
				writeError(w, http.StatusUnauthorized, "wrong token")
				return
			}
			http.SetCookie(w, &http.Cookie{Name: cookieName, Value: tok, Path: "/", HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
			// Take the token out of the address bar and the history.
			http.Redirect(w, r, "/", http.StatusSeeOther)
			return
		}
		tok := bearerToken(r.Header.Get("Authorization"))
		if c, err := r.Cookie(cookieName); tok == "" && err == nil {
			tok = c.Value
		}
		who, err := a.auth.authenticate(r, tok)
		switch {
		case errors.Is(err, errUntrustedProxyHeader):
			a.log.Warn("web console: refused an identity header from a peer that is not a trusted proxy", "peer", r.RemoteAddr, "header", a.cfg.ProxyUserHeader)
			writeError(w, http.StatusForbidden, "identity header refused: this peer is not a trusted proxy")
			return
		case err != nil:
			hd.Set("WWW-Authenticate", `Bearer realm="loopbot"`)
			writeError(w, http.StatusUnauthorized, "this console needs your token: open /?token=... once, or send Authorization: Bearer")
			return
		}
		next.ServeHTTP(w, r.WithContext(withIdentity(r.Context(), who)))
	})
}

func (a *Adapter) serveIndex(w http.ResponseWriter, r *http.Request) {
	page := a.index.render(map[string]string{"Banner": a.cfg.Banner, "Warning": a.warning})
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	io.WriteString(w, page)
}

func serveStatic(data, contentType string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.Header().Set("Cache-Control", "no-cache")
		io.WriteString(w, data)
	}
}

// threadJSON is a thread with its messages, for GET /api/threads/{id}.
type threadJSON struct {
	threadSummary
	Messages []messageData `json:"messages"`
}

// meJSON is who the console knows the page's person as, for GET /api/me.
type meJSON struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Mode is how the console tells people apart, in words.
	Mode string `json:"mode"`
}

func (a *Adapter) serveMe(w http.ResponseWriter, r *http.Request) {
	who, _ := requestIdentity(r)
	writeJSON(w, http.StatusOK, meJSON{ID: who.id(), Name: who.name, Mode: a.auth.mode.String()})
}

func (a *Adapter) serveThreads(w http.ResponseWriter, r *http.Request) {
	who, _ := requestIdentity(r)
	a.mu.Lock()
	list := a.summaries(who)
	a.mu.Unlock()
	writeJSON(w, http.StatusOK, list)
}

// summaries lists the threads who may see, the latest first; a.mu must be held.
func (a *Adapter) summaries(who identity) []threadSummary {
	list := make([]threadSummary, 0, len(a.threads))
	for _, t := range a.threads {
		if a.mayView(who, t.id) {
			list = append(list, t.summary())
		}
	}
	slices.SortFunc(list, func(x, y threadSummary) int { return y.Updated.Compare(x.Updated) })
	return list
}

// visible is the thread with id if who may see it. A thread someone may not see answers
// as one that does not exist, so its ID tells nothing. a.mu must be held.
func (a *Adapter) visible(who identity, id string) (*thread, bool) {
	t, ok := a.threads[id]
	if !ok || !a.mayView(who, id) {
		return nil, false
	}
	return t, true
}

func (a *Adapter) serveThread(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	who, _ := requestIdentity(r)
	a.mu.Lock()
	t, ok := a.visible(who, id)
	var out threadJSON
	if ok {
		out.threadSummary = t.summary()
		out.Messages = make([]messageData, 0, len(t.entries))
		for _, e := range t.entries {
			out.Messages = append(out.Messages, messageData{Thread: t.id, ID: e.id, Pos: e.pos, Kind: e.kind, HTML: e.html})
		}
	}
	a.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "no thread "+id)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// readPost checks a POST's headers and reads its body. The custom header cannot be set by
// a cross-site form or a simple request, and JSON only keeps it that way.
func readPost(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if r.Header.Get("X-Loopbot") != "1" {
		writeError(w, http.StatusForbidden, "missing header X-Loopbot: 1")
		return nil, false
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, "send Content-Type: application/json")
		return nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		if errors.As(err, new(*http.MaxBytesError)) {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body over %d bytes", maxBody))
			return nil, false
		}
		writeError(w, http.StatusBadRequest, "could not read the body")
		return nil, false
	}
	return body, true
}

// postResult is what a POST answers: the thread, and the bot's notice for this user only.
type postResult struct {
	Thread    string `json:"thread"`
	Notice    string `json:"notice,omitempty"`
	Duplicate bool   `json:"duplicate,omitempty"`
}

// newThread is POST /api/threads: a goal opens a thread and starts a run in it.
func (a *Adapter) newThread(w http.ResponseWriter, r *http.Request, h bot.Handler, body []byte) {
	who, _ := requestIdentity(r)
	ev, _, err := decodeRequest(body, bot.EventMention, who)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if a.vs != nil {
		id, err := a.newThreadShared(r.Context(), ev, who)
		if err != nil {
			a.log.Error("web console: open a thread", "err", err)
			writeError(w, http.StatusServiceUnavailable, "loopbot could not store this; try again")
			return
		}
		a.deliver(w, r, h, ev, id, http.StatusCreated)
		return
	}
	a.mu.Lock()
	var t *thread
	for _, x := range a.threads {
		if x.mention == ev.ID && ownedBy(x.id, who.id()) {
			t = x
			break
		}
	}
	if t == nil {
		t = a.thread(newThreadID(who.id()), text.ClipRunes(firstLine(ev.Text), 80))
		t.mention = ev.ID
		a.keepThread(t)
		a.add(t, &entry{id: "u" + ev.ID, kind: kindUser, user: ev.User.Name, text: ev.Text, event: ev.ID})
	}
	id := t.id
	a.mu.Unlock()
	a.flushHistory()
	a.deliver(w, r, h, ev, id, http.StatusCreated)
}

// reply is POST /api/threads/{id}/messages: a message in a thread.
func (a *Adapter) reply(w http.ResponseWriter, r *http.Request, h bot.Handler, body []byte) {
	id := r.PathValue("id")
	who, _ := requestIdentity(r)
	ev, _, err := decodeRequest(body, bot.EventReply, who)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	// Every console thread is a conversation with the bot, even one whose first goal the
	// bot refused: its replies are for the bot.
	ev.Direct = true
	if a.vs != nil {
		ok, err := a.replyShared(r.Context(), id, ev, who)
		switch {
		case err != nil:
			a.log.Error("web console: add a reply", "thread", id, "err", err)
			writeError(w, http.StatusServiceUnavailable, "loopbot could not store this; try again")
		case !ok:
			writeError(w, http.StatusNotFound, "no thread "+id)
		default:
			a.deliver(w, r, h, ev, id, http.StatusOK)
		}
		return
	}
	a.mu.Lock()
	t, ok := a.visible(who, id)
	if ok && !slices.ContainsFunc(t.entries, func(e *entry) bool { return e.event == ev.ID }) {
		a.add(t, &entry{id: "u" + ev.ID, kind: kindUser, user: ev.User.Name, text: ev.Text, event: ev.ID})
		t.updated = a.now()
		a.publishSummary(t)
	}
	a.mu.Unlock()
	a.flushHistory()
	if !ok {
		writeError(w, http.StatusNotFound, "no thread "+id)
		return
	}
	a.deliver(w, r, h, ev, id, http.StatusOK)
}

// action is POST /api/actions: a button was clicked.
func (a *Adapter) action(w http.ResponseWriter, r *http.Request, h bot.Handler, body []byte) {
	who, _ := requestIdentity(r)
	ev, id, err := decodeRequest(body, bot.EventAction, who)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if a.vs != nil {
		// The thread may have been opened on another replica a moment ago.
		if err := a.catchUp(r.Context()); err != nil {
			a.log.Warn("web console: read the console's view", "err", err)
		}
	}
	a.mu.Lock()
	_, ok := a.visible(who, id)
	a.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "no thread "+id)
		return
	}
	a.deliver(w, r, h, ev, id, http.StatusOK)
}

// deliver hands ev to the bot and answers with its notice. The request's cancellation does
// not reach the bot: a closed tab must not leave a submission half handled.
func (a *Adapter) deliver(w http.ResponseWriter, r *http.Request, h bot.Handler, ev bot.Event, threadID string, status int) {
	ev.Thread = threadRef(threadID)
	ev.At = a.now()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), handleTimeout)
	defer cancel()
	res, err := h.Handle(ctx, ev)
	if err != nil {
		a.log.Error("web console: handle event", "event", ev.ID, "kind", ev.Kind, "err", err)
		if errors.Is(err, bot.ErrStopped) {
			writeError(w, http.StatusServiceUnavailable, "loopbot is shutting down; try again when it is back")
			return
		}
		writeError(w, http.StatusInternalServerError, "loopbot could not take this; the server log says why")
		return
	}
	if ev.Kind == bot.EventAction && res.Notice == "" && !res.Duplicate {
		a.chosen(threadID, ev.ActionID, ev.User)
	}
	writeJSON(w, status, postResult{Thread: threadID, Notice: res.Notice, Duplicate: res.Duplicate})
}

// chosen marks the question card that holds the button actionID as decided once the bot
// has taken its click: its buttons go and its footer says who chose what. The bot edits
// the cards it keeps current (status and approval cards) itself, but it never edits a
// question again, whose Continue and Stop would otherwise stay live after the run went on.
func (a *Adapter) chosen(threadID, actionID string, who bot.User) {
	if a.vs != nil {
		a.chosenShared(context.Background(), threadID, actionID, who)
		return
	}
	defer a.flushHistory()
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.threads[threadID]
	if !ok {
		return
	}
	if e, msg, ok := a.decidedQuestion(t, actionID, who); ok {
		a.change(t, e, msg)
	}
}

// decidedQuestion finds the question card of t that holds the button actionID and returns
// it with the message it shows once decided: no buttons, and a footer saying who chose
// what. a.mu is held.
func (a *Adapter) decidedQuestion(t *thread, actionID string, who bot.User) (*entry, bot.Message, bool) {
	for _, e := range t.entries {
		if e.kind != string(bot.KindQuestion) {
			continue
		}
		i := slices.IndexFunc(e.msg.Buttons, func(b bot.Button) bool { return b.ID == actionID })
		if i < 0 {
			continue
		}
		msg := e.msg
		msg.Footer = msg.Buttons[i].Label + ": chosen by " + who.Name + " at " + a.now().UTC().Format("15:04 UTC") + "."
		msg.Buttons = nil
		return e, msg, true
	}
	return nil, bot.Message{}, false
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// writeError answers {"error": msg}.
func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, struct {
		Error string `json:"error"`
	}{msg})
}
