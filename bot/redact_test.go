package bot_test

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/loopbot/loopbot/bot"
)

func TestRedact(t *testing.T) {
	r := bot.NewRedactor([]string{"hunter2-secret", "abc", "  "})
	tests := []struct {
		name, in, want string
	}{
		{"slack bot token", "token xoxb-1234567890-0987654321-AbCdEfGh here", "token [redacted] here"},
		{"slack user token", "xoxp-1234567890-abcdefghij", "[redacted]"},
		{"slack app token", "SLACK_APP_TOKEN=xapp-1-A0123456789-1234567890-abcdef", "SLACK_APP_TOKEN=[redacted]"},
		{"openai key", "OPENAI_API_KEY=sk-proj-AbCdEfGhIjKlMnOpQrStUvWx_yz-0123", "OPENAI_API_KEY=[redacted]"},
		{"github classic", "ghp_abcdefghijklmnopqrstuvwxyz0123456789 ok", "[redacted] ok"},
		{"github fine-grained", "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", "[redacted]"},
		{"aws key id", "aws_access_key_id = AKIAIOSFODNN7EXAMPLE", "aws_access_key_id = [redacted]"},
		{"aws secret in a credentials file", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n", "aws_secret_access_key = [redacted]\n"},
		{"aws secret in the environment", "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "AWS_SECRET_ACCESS_KEY=[redacted]"},
		{"secret-named variables", "DB_PASSWORD=hunter2hunter2\nexport STRIPE_API_KEY=\"rk_live_51Habc0123\"", "DB_PASSWORD=[redacted]\nexport STRIPE_API_KEY=\"[redacted]\""},
		{"password in a URL", "DATABASE_URL=postgres://app:s3cr3t-pw@db.internal:5432/app", "DATABASE_URL=postgres://app:[redacted]@db.internal:5432/app"},
		{"discord bot token", "MTA4NjM0NTY3ODkwMTIzNDU2Nw.GabcDE.abcdefghijklmnopqrstuvwxyz012345", "[redacted]"},
		{"bearer", "Authorization: Bearer abc.def-ghi_jkl", "Authorization: Bearer [redacted]"},
		{"jwt", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", "[redacted]"},
		{"private key", "x\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjE=\n-----END OPENSSH PRIVATE KEY-----\ny", "x\n[redacted]\ny"},
		{"cut private key", "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA", "[redacted]"},
		{"configured value", "the password is hunter2-secret.", "the password is [redacted]."},
		{"short configured values are ignored", "abc and spaces", "abc and spaces"},
		{"ordinary text", "sk-short, task-1234, xoxb- and a skeleton key", "sk-short, task-1234, xoxb- and a skeleton key"},
		{"ordinary settings and addresses", "MAX_TOKENS=4096, TOKEN_LIMIT=short, http://localhost:8080/a@b, me@example.com",
			"MAX_TOKENS=4096, TOKEN_LIMIT=short, http://localhost:8080/a@b, me@example.com"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := r.Redact(tt.in); got != tt.want {
				t.Errorf("Redact(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// FuzzRedact plants a Slack token and a configured secret in arbitrary text: neither may
// survive, whatever surrounds them.
func FuzzRedact(f *testing.F) {
	f.Add("hello", []byte("tokenbytes"), []byte{1, 2, 3, 4})
	f.Add("xoxb-", []byte("A"), []byte("-----BEGIN"))
	f.Add("Bearer ", []byte{0xff, 0x00}, []byte("sk-"))
	f.Fuzz(func(t *testing.T, text string, tok, sec []byte) {
		// The planted values are shaped like real ones: a Slack token of at least ten
		// characters, and a configured value of uppercase hex, which "[redacted]" cannot
		// spell.
		token := "xoxb-" + hex.EncodeToString(append(tok, make([]byte, 5)...))
		secret := "S" + strings.ToUpper(hex.EncodeToString(append(sec, 0xAB, 0xCD)))
		r := bot.NewRedactor([]string{secret})
		in := text + " " + token + " " + text + " " + secret + " " + text
		out := r.Redact(in)
		if strings.Contains(out, token) || strings.Contains(out, secret) {
			t.Fatalf("Redact(%q) = %q still holds a secret", in, out)
		}
		if again := r.Redact(out); again != out {
			t.Fatalf("Redact is not stable: %q then %q", out, again)
		}
	})
}
