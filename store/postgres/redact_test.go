package postgres

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
)

func TestRedactURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"postgres://loopbot:s3cr3t@db.internal:5432/loopbot?sslmode=require", "postgres://loopbot:xxxxx@db.internal:5432/loopbot?sslmode=require"},
		{"postgresql://loopbot:p%40ss%2Fw@db/loopbot", "postgresql://loopbot:xxxxx@db/loopbot"},
		{"postgres://db/loopbot?user=loopbot&password=s3cr3t", "postgres://db/loopbot?password=xxxxx&user=loopbot"},
		{"postgres://loopbot@db/loopbot", "postgres://loopbot@db/loopbot"},
		{"host=db user=loopbot password=s3cr3t dbname=loopbot", "host=db user=loopbot password=xxxxx dbname=loopbot"},
		{`host=db password = 'it\'s s3cr3t' dbname=loopbot`, "host=db password = xxxxx dbname=loopbot"},
		{"postgres://loopbot:s3cr3t@db:notaport/x", "(a database URL that does not parse)"},
	}
	for _, tt := range tests {
		got := RedactURL(tt.in)
		if got != tt.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if strings.Contains(got, "s3cr3t") {
			t.Errorf("RedactURL(%q) keeps the password", tt.in)
		}
	}
}

// TestOpenErrorsHideThePassword opens URLs that fail in each way Open can fail before it
// has a database, and checks that no error quotes the password, escaped or not.
func TestOpenErrorsHideThePassword(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	const pw = "s3cr3t/p@ss"
	tests := []string{
		"postgres://loopbot:s3cr3t%2Fp%40ss@" + addr + "/loopbot?connect_timeout=5",
		"postgres://loopbot:s3cr3t%2Fp%40ss@" + addr + "/loopbot?sslmode=bogus",
		"host=127.0.0.1 port=" + addr[strings.LastIndex(addr, ":")+1:] + " user=loopbot password='" + pw + "' connect_timeout=5",
		"host=127.0.0.1 password=" + "s3cr3t/p@ss" + " sslmode=bogus",
	}
	for _, url := range tests {
		_, err := Open(context.Background(), url)
		if err == nil {
			t.Errorf("Open(%s) succeeded", RedactURL(url))
			continue
		}
		for _, leak := range []string{"s3cr3t", "p@ss", "p%40ss"} {
			if strings.Contains(err.Error(), leak) {
				t.Errorf("Open's error quotes the password (%q): %v", leak, err)
			}
		}
	}
}

func TestRedactErrKeepsWhatItWraps(t *testing.T) {
	err := redactErr(errors.Join(context.Canceled, errors.New("dial user:s3cr3t@db")), "s3cr3t")
	if !errors.Is(err, context.Canceled) {
		t.Error("the redacted error no longer wraps context.Canceled")
	}
	if strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("message keeps the password: %v", err)
	}
}
