package web

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/loopbot/loopbot/bot"
)

const (
	annToken = "ann-0123456789abcdef"
	bobToken = "bob-0123456789abcdef"
)

var testUsers = map[string]string{"ann": annToken, "bob": bobToken}

// as is the header that signs a request in with tok.
func as(tok string) []string { return []string{"Authorization", "Bearer " + tok} }

func TestIdentityConfigCheck(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"users on all interfaces", Config{Addr: ":8080", Users: testUsers}, ""},
		{"proxy on all interfaces", Config{Addr: ":8080", TrustedProxies: []string{"10.0.0.5", "10.1.0.0/16", "::1"}}, ""},
		{"users from the environment", Config{Addr: ":8080", UsersEnv: "ann=" + annToken + ", bob=" + bobToken}, ""},
		{"short user token", Config{Users: map[string]string{"ann": "short"}}, `web users "ann": token: want at least 16`},
		{"user token with a space", Config{Users: map[string]string{"ann": annToken + " x"}}, `web users "ann": token: must not contain`},
		{"user name with a space", Config{Users: map[string]string{"a b": annToken}}, `web users "a b": user name`},
		{"same token twice", Config{Users: map[string]string{"ann": annToken, "bob": annToken}}, `"ann" and "bob": the same token`},
		{"name in file and env", Config{Users: map[string]string{"ann": annToken}, UsersEnv: "ann=" + bobToken}, "both in the file and in LOOPBOT_WEB_USERS"},
		{"bad env", Config{UsersEnv: "ann"}, "LOOPBOT_WEB_USERS: web users entry 1: want name=token"},
		{"shared token with users", Config{Token: testToken, Users: testUsers}, "a shared token makes everyone one person"},
		{"shared token with proxy", Config{Token: testToken, TrustedProxies: []string{"10.0.0.5"}}, "a shared token makes everyone one person"},
		{"bad proxy", Config{TrustedProxies: []string{"proxy.lan"}}, `web trusted_proxies "proxy.lan"`},
		{"bad proxy header", Config{TrustedProxies: []string{"10.0.0.5"}, ProxyUserHeader: "X User"}, "proxy_user_header"},
		{"bad threads", Config{Threads: "some"}, `web threads "some"`},
		{"bad viewer", Config{Viewers: []string{""}}, "web viewers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.cfg.check()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if got.UsersEnv != "" || len(got.Users) != len(tt.cfg.Users)+strings.Count(tt.cfg.UsersEnv, "=") {
					t.Errorf("users not merged: %v", got.Users)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
			}
			for _, tok := range []string{annToken, bobToken, testToken} {
				if strings.Contains(err.Error(), tok) {
					t.Errorf("the error repeats a token: %v", err)
				}
			}
		})
	}
}

// TestExposedSharedTokenRefused: a console beyond loopback with one shared token cannot
// tell people apart, so with approver rules it does not start, from New or from Serve.
func TestExposedSharedTokenRefused(t *testing.T) {
	off := false
	for _, tt := range []struct {
		name    string
		cfg     Config
		policy  bot.Policy
		wantErr string
	}{
		{"default policy", Config{Addr: ":8080", Token: testToken}, bot.Policy{}, "the bot's dangerous_needs_other need it"},
		{"approvers", Config{Addr: "0.0.0.0:8080", Token: testToken}, bot.Policy{Approvers: []string{"web:boss"}, DangerousNeedsOther: &off}, "the bot's approvers need it"},
		{"approve_by approvers", Config{Addr: ":8080", Token: testToken}, bot.Policy{ApproveBy: bot.ApproveByApprovers, DangerousNeedsOther: &off}, `approve_by = "approvers"`},
		{"no rules", Config{Addr: ":8080", Token: testToken}, bot.Policy{DangerousNeedsOther: &off}, ""},
		{"per-user tokens", Config{Addr: ":8080", Users: testUsers}, bot.Policy{Approvers: []string{"web:bob"}}, ""},
		{"proxy", Config{Addr: ":8080", TrustedProxies: []string{"10.0.0.5"}}, bot.Policy{}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg, WithPolicy(tt.policy))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "[web.users]") {
				t.Fatalf("err = %v, want one containing %q that says what to do", err, tt.wantErr)
			}
		})
	}

	// Configured for loopback, but handed a listener on another address.
	a, err := New(Config{Token: testToken}, WithPolicy(bot.Policy{}), WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	ln := &fakeListener{addr: &net.TCPAddr{IP: net.IPv4(192, 0, 2, 7), Port: 8080}}
	err = a.Serve(context.Background(), ln, &recorder{})
	if err == nil || !strings.Contains(err.Error(), "cannot tell people apart") || !ln.closed {
		t.Errorf("Serve on 192.0.2.7 with a shared token: err = %v, closed %v", err, ln.closed)
	}
}

// fakeListener is a listener on an address no test may bind; it accepts nothing.
type fakeListener struct {
	addr   net.Addr
	closed bool
}

func (l *fakeListener) Accept() (net.Conn, error) { return nil, net.ErrClosed }
func (l *fakeListener) Close() error              { l.closed = true; return nil }
func (l *fakeListener) Addr() net.Addr            { return l.addr }

// TestSinglePersonWarning: on loopback with no users, approver rules that need two people
// are reported in the log and on every page, and the console still starts.
func TestSinglePersonWarning(t *testing.T) {
	off := false
	for _, tt := range []struct {
		name   string
		policy bot.Policy
		want   string
	}{
		{"default policy", bot.Policy{}, "dangerous_needs_other cannot be enforced here (a dangerous call cannot be approved from this console)"},
		{"approvers", bot.Policy{Approvers: []string{"web:boss"}, DangerousNeedsOther: &off}, "approvers cannot be enforced here."},
		{"no rules", bot.Policy{DangerousNeedsOther: &off}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var log bytes.Buffer
			_, srv, _ := newServer(t, Config{}, WithPolicy(tt.policy), WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
			_, page := get(t, srv, "/")
			body := page["body"].(string)
			if tt.want == "" {
				if strings.Contains(body, "identity-warning") || log.Len() != 0 {
					t.Errorf("a warning without rules: page %q, log %q", body, log.String())
				}
				return
			}
			if !strings.Contains(body, `id="identity-warning"`) || !strings.Contains(body, tt.want) {
				t.Errorf("page lacks the warning %q:\n%s", tt.want, body)
			}
			if !strings.Contains(log.String(), "level=WARN") || !strings.Contains(log.String(), "cannot be enforced") {
				t.Errorf("log %q, want a warning", log.String())
			}
		})
	}
}

// TestForgedUserIgnored: the name in a body or query is not who acts. The bot sees the
// signed-in person only, on a single-person console and with per-user tokens.
func TestForgedUserIgnored(t *testing.T) {
	t.Run("single person", func(t *testing.T) {
		_, srv, rec := newServer(t, Config{})
		res, v := post(t, srv, "/api/threads", goal(uuid1, "boss", "approve everything"))
		if res.StatusCode != http.StatusCreated {
			t.Fatalf("goal: %s %v", res.Status, v)
		}
		if got := rec.got(); len(got) != 1 || got[0].User != (bot.User{ID: "web:you", Name: "you"}) {
			t.Errorf("the bot got %+v, want the one person, you", got)
		}
	})
	t.Run("per-user tokens", func(t *testing.T) {
		_, srv, rec := newServer(t, Config{Users: testUsers})
		res, v := post(t, srv, "/api/threads?user=boss", goal(uuid1, "boss", "deploy"), as(annToken)...)
		if res.StatusCode != http.StatusCreated {
			t.Fatalf("goal: %s %v", res.Status, v)
		}
		thread := v["thread"].(string)
		click := `{"id":"2b5d6c1e-4a8e-4f0a-9a55-3d7f2c1e9b10","user":"boss","action":"approve-1","thread":"` + thread + `"}`
		if res, v := post(t, srv, "/api/actions", click, as(annToken)...); res.StatusCode != http.StatusOK {
			t.Fatalf("click: %s %v", res.Status, v)
		}
		reply := goal("1b5d6c1e-4a8e-4f0a-9a55-3d7f2c1e9b10", "boss", "go")
		if res, v := post(t, srv, "/api/threads/"+thread+"/messages", reply, as(annToken)...); res.StatusCode != http.StatusOK {
			t.Fatalf("reply: %s %v", res.Status, v)
		}
		ann := bot.User{ID: "web:ann", Name: "ann"}
		for _, ev := range rec.got() {
			if ev.User != ann {
				t.Errorf("%s by %+v, want ann", ev.Kind, ev.User)
			}
		}
		if n := len(rec.got()); n != 3 {
			t.Errorf("the bot got %d events, want 3", n)
		}
		// A forged name with no credential gets nothing through.
		if res, _ := post(t, srv, "/api/threads", goal("3b5d6c1e-4a8e-4f0a-9a55-3d7f2c1e9b10", "ann", "x")); res.StatusCode != http.StatusUnauthorized {
			t.Errorf("goal without a token: %s, want 401", res.Status)
		}
	})
}

// TestUserTokenLogin: each person signs in with their own token, by the login link's cookie
// or a bearer header, and the console knows them by it.
func TestUserTokenLogin(t *testing.T) {
	_, srv, _ := newServer(t, Config{Addr: ":8080", Users: testUsers})
	res, _ := get(t, srv, "/?token="+bobToken)
	if res.StatusCode != http.StatusSeeOther || len(res.Cookies()) != 1 {
		t.Fatalf("login: %s %v", res.Status, res.Cookies())
	}
	cookie := res.Cookies()[0]
	for _, tt := range []struct {
		name string
		hdr  []string
		want int
		who  string
	}{
		{"cookie", []string{"Cookie", cookie.Name + "=" + cookie.Value}, http.StatusOK, "bob"},
		{"bearer", as(annToken), http.StatusOK, "ann"},
		{"bearer, any case", []string{"Authorization", "bearer " + annToken}, http.StatusOK, "ann"},
		{"bearer wins over cookie", append(as(annToken), "Cookie", cookie.Name+"="+cookie.Value), http.StatusOK, "ann"},
		{"nothing", nil, http.StatusUnauthorized, ""},
		{"wrong token", as(annToken + "x"), http.StatusUnauthorized, ""},
		{"a name, no token", []string{"Authorization", "Bearer ann"}, http.StatusUnauthorized, ""},
		{"proxy header, no proxy configured", []string{"X-Forwarded-User", "ann"}, http.StatusUnauthorized, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, v := get(t, srv, "/api/me?user=boss", tt.hdr...)
			if res.StatusCode != tt.want {
				t.Fatalf("GET /api/me: %s, want %d", res.Status, tt.want)
			}
			if tt.who != "" && (v["name"] != tt.who || v["id"] != "web:"+tt.who || v["mode"] != "per-user tokens") {
				t.Errorf("me = %v, want %s", v, tt.who)
			}
		})
	}
	if res, _ := get(t, srv, "/?token="+testToken); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("login with a token nobody has: %s, want 401", res.Status)
	}
}

// TestProxyIdentity: the proxy's header is believed from the proxy's address only.
func TestProxyIdentity(t *testing.T) {
	// httptest's client connects from 127.0.0.1.
	_, proxied, rec := newServer(t, Config{Addr: ":8080", TrustedProxies: []string{"127.0.0.1"}, Users: map[string]string{"bob": bobToken}})
	_, direct, directRec := newServer(t, Config{Addr: ":8080", TrustedProxies: []string{"10.0.0.0/8"}, Users: map[string]string{"bob": bobToken}})
	for _, tt := range []struct {
		name string
		srv  *httptest.Server
		hdr  []string
		want int
		who  string
	}{
		{"from the proxy", proxied, []string{"X-Forwarded-User", "carol@example.com"}, http.StatusOK, "carol@example.com"},
		{"from the proxy, header wins over token", proxied, append([]string{"X-Forwarded-User", "carol"}, as(bobToken)...), http.StatusOK, "carol"},
		{"from the proxy, no header", proxied, nil, http.StatusUnauthorized, ""},
		{"from the proxy, a token", proxied, as(bobToken), http.StatusOK, "bob"},
		{"from the proxy, a bad name", proxied, []string{"X-Forwarded-User", "carol smith"}, http.StatusUnauthorized, ""},
		{"from another peer", direct, []string{"X-Forwarded-User", "carol"}, http.StatusForbidden, ""},
		{"from another peer, with a token too", direct, append([]string{"X-Forwarded-User", "carol"}, as(bobToken)...), http.StatusForbidden, ""},
		{"from another peer, a token", direct, as(bobToken), http.StatusOK, "bob"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, v := get(t, tt.srv, "/api/me", tt.hdr...)
			if res.StatusCode != tt.want {
				t.Fatalf("GET /api/me: %s %v, want %d", res.Status, v, tt.want)
			}
			if tt.who != "" && v["name"] != tt.who {
				t.Errorf("me = %v, want %s", v, tt.who)
			}
		})
	}
	if res, _ := post(t, direct, "/api/threads", goal(uuid1, "carol", "x"), "X-Forwarded-User", "carol"); res.StatusCode != http.StatusForbidden {
		t.Errorf("a goal with the header from another peer: %s, want 403", res.Status)
	}
	if len(directRec.got()) != 0 {
		t.Errorf("the bot got %v from a peer that is no proxy", directRec.got())
	}
	if res, v := post(t, proxied, "/api/threads", goal(uuid1, "boss", "x"), "X-Forwarded-User", "carol"); res.StatusCode != http.StatusCreated {
		t.Fatalf("a goal through the proxy: %s %v", res.Status, v)
	}
	if got := rec.got(); len(got) != 1 || got[0].User.ID != "web:carol" {
		t.Errorf("the bot got %+v, want carol's goal", got)
	}
	// Two values of the header are not guessed between.
	req, _ := http.NewRequest(http.MethodGet, proxied.URL+"/api/me", nil)
	req.Header.Add("X-Forwarded-User", "carol")
	req.Header.Add("X-Forwarded-User", "boss")
	if res, _ := do(t, proxied, req); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("two identity headers: %s, want 401", res.Status)
	}
}

// TestThreadVisibility: a person sees the threads they started; another's thread answers
// as if it did not exist, and its changes do not reach their pages. Approvers and viewers
// see every thread; with threads = "all" everyone does.
func TestThreadVisibility(t *testing.T) {
	users := map[string]string{"ann": annToken, "bob": bobToken, "carol": "carol-0123456789abcdef", "dave": "dave-0123456789abcdef"}
	a, srv, rec := newServer(t, Config{Users: users, Viewers: []string{"dave"}}, WithPolicy(bot.Policy{Approvers: []string{"web:carol"}}))
	bob := openStream(t, srv, "", "", as(bobToken)...)
	bob.until("sync")
	res, v := post(t, srv, "/api/threads", goal(uuid1, "ann", "ann's secret goal"), as(annToken)...)
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("goal: %s %v", res.Status, v)
	}
	id := v["thread"].(string)
	a.Notify(context.Background(), threadRef(id), "web:ann", "ann's notice")
	a.Post(context.Background(), threadRef(id), msg("ann's run is waiting"))

	for _, tt := range []struct {
		who, tok string
		sees     bool
	}{
		{"ann", annToken, true},
		{"bob", bobToken, false},
		{"carol (approver)", users["carol"], true},
		{"dave (viewer)", users["dave"], true},
	} {
		t.Run(tt.who, func(t *testing.T) {
			_, list := getList(t, srv, "/api/threads", as(tt.tok)...)
			if listed := strings.Contains(list, id); listed != tt.sees {
				t.Errorf("thread listed %v, want %v: %s", listed, tt.sees, list)
			}
			want := http.StatusNotFound
			if tt.sees {
				want = http.StatusOK
			}
			if res, _ := get(t, srv, "/api/threads/"+id, as(tt.tok)...); res.StatusCode != want {
				t.Errorf("GET thread: %s, want %d", res.Status, want)
			}
			if tt.sees {
				openStream(t, srv, "thread="+id, "", as(tt.tok)...).until("sync")
			} else {
				// A stream that opens would never end: only its status is read.
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/api/events?thread="+id, nil)
				req.Header.Set("Authorization", "Bearer "+tt.tok)
				res, err := srv.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				res.Body.Close()
				if res.StatusCode != http.StatusNotFound {
					t.Errorf("GET events of the thread: %s, want 404", res.Status)
				}
			}
		})
	}
	n := len(rec.got())
	reply := goal("1b5d6c1e-4a8e-4f0a-9a55-3d7f2c1e9b10", "ann", "stop")
	if res, _ := post(t, srv, "/api/threads/"+id+"/messages", reply, as(bobToken)...); res.StatusCode != http.StatusNotFound {
		t.Errorf("bob replies in ann's thread: %s, want 404", res.Status)
	}
	click := `{"id":"2b5d6c1e-4a8e-4f0a-9a55-3d7f2c1e9b10","action":"cancel-1","thread":"` + id + `"}`
	if res, _ := post(t, srv, "/api/actions", click, as(bobToken)...); res.StatusCode != http.StatusNotFound {
		t.Errorf("bob clicks in ann's thread: %s, want 404", res.Status)
	}
	if len(rec.got()) != n {
		t.Errorf("bob's reply or click reached the bot")
	}
	// Bob resubmitting ann's goal's ID does not find her thread: a double submit is one
	// person's.
	if res, v := post(t, srv, "/api/threads", goal(uuid1, "ann", "same id"), as(bobToken)...); res.StatusCode != http.StatusCreated || v["thread"] == id {
		t.Errorf("bob's goal with ann's submission ID: %s %v", res.Status, v)
	}
	// Bob's page got nothing of ann's thread: a thread of his own comes next, and before
	// it no event names ann's.
	if res, _ := post(t, srv, "/api/threads", goal("4b5d6c1e-4a8e-4f0a-9a55-3d7f2c1e9b10", "", "bob's goal"), as(bobToken)...); res.StatusCode != http.StatusCreated {
		t.Fatal(res.Status)
	}
	for {
		ev := bob.next()
		if ev.data["id"] == id || ev.data["thread"] == id || ev.name == "notice" {
			t.Fatalf("bob's stream got %+v of ann's thread", ev)
		}
		if ev.name == "thread" && ev.data["title"] == "bob's goal" {
			break
		}
	}

	// threads = "all": everyone sees everything.
	_, all, _ := newServer(t, Config{Users: users, Threads: ThreadsAll})
	_, v = post(t, all, "/api/threads", goal(uuid1, "", "shared goal"), as(annToken)...)
	if res, _ := get(t, all, "/api/threads/"+v["thread"].(string), as(bobToken)...); res.StatusCode != http.StatusOK {
		t.Errorf("threads = all: bob gets ann's thread %s", res.Status)
	}
}

// TestOwnerSurvivesRestart: a console that restarted knows a thread's owner from its ID
// when the bot posts to it again.
func TestOwnerSurvivesRestart(t *testing.T) {
	_, srv, _ := newServer(t, Config{Users: testUsers})
	_, v := post(t, srv, "/api/threads", goal(uuid1, "", "deploy"), as(annToken)...)
	id := v["thread"].(string)

	a2, srv2, _ := newServer(t, Config{Users: testUsers})
	if _, err := a2.Post(context.Background(), threadRef(id), msg("waiting for approval")); err != nil {
		t.Fatal(err)
	}
	if res, _ := get(t, srv2, "/api/threads/"+id, as(annToken)...); res.StatusCode != http.StatusOK {
		t.Errorf("ann after the restart: %s", res.Status)
	}
	if res, _ := get(t, srv2, "/api/threads/"+id, as(bobToken)...); res.StatusCode != http.StatusNotFound {
		t.Errorf("bob after the restart: %s, want 404", res.Status)
	}
}

// getList is GET of a JSON list, returned as text.
func getList(t *testing.T, srv *httptest.Server, path string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	r, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	if r.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", path, r.Status)
	}
	var b bytes.Buffer
	b.ReadFrom(r.Body)
	return r, b.String()
}

func FuzzParseUsers(f *testing.F) {
	f.Add("ann=" + annToken + ", bob=" + bobToken)
	f.Add("ann=" + annToken + "\nann=" + bobToken)
	f.Add("=x,a==b,\x00=" + annToken)
	f.Add("é=" + strings.Repeat("\u00a0", 20))
	f.Fuzz(func(t *testing.T, s string) {
		users, err := ParseUsers(s)
		if err != nil {
			if strings.Contains(err.Error(), annToken) || strings.Contains(err.Error(), bobToken) {
				t.Fatalf("the error repeats a token: %v", err)
			}
			return
		}
		for name, tok := range users {
			if checkUserName(name) != nil || checkToken(tok) != nil {
				t.Fatalf("accepted %q=%q", name, tok)
			}
			if !strings.Contains(s, name+"="+tok) {
				t.Fatalf("%q=%q is not in the input", name, tok)
			}
		}
		// What was accepted reads back the same, written out again.
		var b strings.Builder
		for name, tok := range users {
			b.WriteString(name + "=" + tok + ",")
		}
		again, err := ParseUsers(b.String())
		if err != nil || len(again) != len(users) {
			t.Fatalf("written out again: %v, %v", again, err)
		}
	})
}

func FuzzIdentityHeaders(f *testing.F) {
	f.Add("carol@example.com", "Bearer "+annToken)
	f.Add(" carol ", "bearer  x ")
	f.Add("a\u200bb", "Basic abc")
	f.Add("", "Bearer")
	f.Fuzz(func(t *testing.T, user, auth string) {
		if name, ok := proxyUser([]string{user}); ok {
			if checkUserName(name) != nil || strings.ContainsFunc(name, func(r rune) bool { return r < ' ' || r == 0x7f }) {
				t.Fatalf("proxy user %q accepted as %q", user, name)
			}
		}
		if _, ok := proxyUser([]string{user, user}); ok {
			t.Fatal("two header values accepted")
		}
		tok := bearerToken(auth)
		if tok != strings.TrimSpace(tok) || (tok != "" && !strings.Contains(auth, tok)) {
			t.Fatalf("bearer %q from %q", tok, auth)
		}
		a, err := newAuthenticator(Config{Users: testUsers})
		if err != nil {
			t.Fatal(err)
		}
		if name, ok := a.token(tok); ok != (tok == annToken || tok == bobToken) || ok && testUsers[name] != tok {
			t.Fatalf("token %q: %q %v", tok, name, ok)
		}
	})
}
