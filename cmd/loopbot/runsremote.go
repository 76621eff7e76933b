package main

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store"
	"github.com/loopbot/loopbot/store/postgres"
)

// `loopbot runs` while the daemon runs.
//
// bbolt's lock is exclusive for the writer, and even a read-only open takes a shared lock
// that waits on it, so while the daemon holds the file no other process can read it at
// all. So `runs` asks the running daemon instead, over its admin endpoint, and renders what
// it gets through the same functions as when it reads the file itself.
//
// The admin endpoint serves /metrics to whoever can reach it, often a scraper on another
// host; transcripts hold goals, tool arguments and outputs, which are for whoever may read
// the database. So the runs routes take a token, new at every start, which the daemon
// writes next to the database in a file only its owner can read (adminFilePath): whoever
// can read that file could read the database, and nobody else gets the runs.

// adminFile is what the daemon publishes next to its database for `loopbot runs`.
type adminFile struct {
	Addr  string `json:"addr"`
	Token string `json:"token"`
	PID   int    `json:"pid"`
}

// adminFilePath is where the daemon serving the database at dbPath publishes its admin
// endpoint.
func adminFilePath(dbPath string) string { return dbPath + ".admin" }

// publishAdmin writes the admin file for the endpoint listening at addr and returns its
// token; the returned function removes the file.
func publishAdmin(dbPath, addr string) (token string, remove func(context.Context) error, err error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", nil, fmt.Errorf("admin token: %w", err)
	}
	token = hex.EncodeToString(b)
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", nil, fmt.Errorf("admin address: %w", err)
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		// Listening on every address: the loopback one is nearest.
		host = "127.0.0.1"
	}
	data, err := json.Marshal(adminFile{Addr: net.JoinHostPort(host, port), Token: token, PID: os.Getpid()})
	if err != nil {
		return "", nil, err
	}
	path := adminFilePath(dbPath)
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*")
	if err != nil {
		return "", nil, fmt.Errorf("write admin file: %w", err)
	}
	_, werr := tmp.Write(data)
	if err := errors.Join(werr, tmp.Close()); err != nil {
		os.Remove(tmp.Name())
		return "", nil, fmt.Errorf("write admin file: %w", err)
	}
	// CreateTemp makes the file 0600: only the database's owner reads the token.
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return "", nil, fmt.Errorf("write admin file: %w", err)
	}
	remove = func(context.Context) error {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove admin file: %w", err)
		}
		return nil
	}
	return token, remove, nil
}

// runsHandler serves the runs to `loopbot runs` in another process: GET /runs lists them,
// GET /runs/{id} is one with its audit entries. The records go out as the store keeps them;
// the asking process renders them.
func runsHandler(db bot.Store, token string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /runs", func(w http.ResponseWriter, r *http.Request) {
		var runs []*bot.RunRecord
		err := db.View(r.Context(), func(tx bot.Tx) error {
			var err error
			runs, err = tx.Runs(bot.RunFilter{})
			return err
		})
		writeRemote(w, runs, err)
	})
	mux.HandleFunc("GET /runs/{id}", func(w http.ResponseWriter, r *http.Request) {
		var out remoteRun
		err := db.View(r.Context(), func(tx bot.Tx) error {
			var err error
			if out.Run, err = tx.Run(r.PathValue("id")); err != nil {
				return err
			}
			out.Audit, err = tx.Audit(r.PathValue("id"))
			return err
		})
		writeRemote(w, out, err)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, []byte("Bearer "+token)) != 1 {
			http.Error(w, "this needs the token of the admin file next to the database", http.StatusUnauthorized)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// remoteRun is one run as GET /runs/{id} serves it.
type remoteRun struct {
	Run   *bot.RunRecord   `json:"run"`
	Audit []bot.AuditEntry `json:"audit"`
}

func writeRemote(w http.ResponseWriter, v any, err error) {
	switch {
	case errors.Is(err, bot.ErrNotFound):
		http.Error(w, "no such run", http.StatusNotFound)
		return
	case err != nil:
		http.Error(w, "read runs: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// runsSource is where `loopbot runs` reads runs from: the database, or the daemon that
// holds it.
type runsSource interface {
	runs(ctx context.Context) ([]*bot.RunRecord, error)
	// run returns an error wrapping bot.ErrNotFound for an unknown ID.
	run(ctx context.Context, id string) (*bot.RunRecord, []bot.AuditEntry, error)
	close() error
}

// openRuns opens the database for `loopbot runs`, or, when a running loopbot holds it,
// connects to that loopbot's admin endpoint.
func (m *Main) openRuns() (runsSource, error) {
	if m.Config.Store.Backend == backendPostgres {
		// Replicas share the database, and so can this command.
		db, err := postgres.Open(context.Background(), m.Config.Store.URL, postgres.WithoutMigration())
		if err != nil {
			return nil, err
		}
		return dbRuns{db}, nil
	}
	path := m.Config.Store.Path
	db, err := store.Open(path, store.WithLockTimeout(time.Duration(m.Config.Store.LockTimeout)))
	if err == nil {
		return dbRuns{db}, nil
	}
	if !errors.Is(err, store.ErrLocked) {
		return nil, err
	}
	data, ferr := os.ReadFile(adminFilePath(path))
	if errors.Is(ferr, os.ErrNotExist) {
		return nil, fmt.Errorf("%w, which serves no admin endpoint to ask instead ([admin] addr is off)", err)
	}
	if ferr != nil {
		return nil, fmt.Errorf("%w; its admin file: %w", err, ferr)
	}
	var f adminFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("read %s: %w", adminFilePath(path), err)
	}
	return remoteRuns{f: f, client: &http.Client{Timeout: 30 * time.Second}}, nil
}

// dbRuns reads runs from the database.
type dbRuns struct{ db bot.Store }

func (s dbRuns) runs(ctx context.Context) ([]*bot.RunRecord, error) {
	var runs []*bot.RunRecord
	err := s.db.View(ctx, func(tx bot.Tx) error {
		var err error
		runs, err = tx.Runs(bot.RunFilter{})
		return err
	})
	return runs, err
}

func (s dbRuns) run(ctx context.Context, id string) (*bot.RunRecord, []bot.AuditEntry, error) {
	var rec *bot.RunRecord
	var audit []bot.AuditEntry
	err := s.db.View(ctx, func(tx bot.Tx) error {
		var err error
		if rec, err = tx.Run(id); err != nil {
			return err
		}
		audit, err = tx.Audit(id)
		return err
	})
	return rec, audit, err
}

func (s dbRuns) close() error { return s.db.Close() }

// remoteRuns asks the daemon that holds the database.
type remoteRuns struct {
	f      adminFile
	client *http.Client
}

func (s remoteRuns) runs(ctx context.Context) ([]*bot.RunRecord, error) {
	var runs []*bot.RunRecord
	return runs, s.get(ctx, "/runs", &runs)
}

func (s remoteRuns) run(ctx context.Context, id string) (*bot.RunRecord, []bot.AuditEntry, error) {
	var out remoteRun
	if err := s.get(ctx, "/runs/"+url.PathEscape(id), &out); err != nil {
		return nil, nil, err
	}
	if out.Run == nil {
		return nil, nil, errors.New("the running loopbot sent no run")
	}
	return out.Run, out.Audit, nil
}

func (s remoteRuns) close() error { return nil }

func (s remoteRuns) get(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.f.Addr+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+s.f.Token)
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("ask the running loopbot (pid %d) at %s: %w", s.f.PID, s.f.Addr, err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return bot.ErrNotFound
	default:
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		return fmt.Errorf("ask the running loopbot (pid %d) at %s: %s: %s", s.f.PID, s.f.Addr, resp.Status, msg)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("read the running loopbot's answer: %w", err)
	}
	return nil
}
