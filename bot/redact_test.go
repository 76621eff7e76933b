package bot_test

import (
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
)

// Test credentials: shaped like real ones, issued by nobody.
const (
	configuredSecret = "hunter2-correct-horse"
	specialSecret    = "p@ss/w0rd+k3y!z"
	githubToken      = "ghp_R7kQ2mN9pL4vT8wZ3yBx5cV1dF6gH0jK2lM4"
	openaiKey        = "sk-proj-AbCdEfGhIjKlMnOpQrStUvWx_yz-0123"
	stripeKey        = "sk_live_51HqLyjWDarjtT1zdp7dcXg2Qe"
	googleKey        = "AIzaSyD3kF9x0Qm2Lp7vT1nB8cR4eW6yU5iO0aZ"
	gitlabToken      = "glpat-xR7kQ2mN9pL4vT8wZ3yB"
	hfToken          = "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"
	slackWebhook     = "https://hooks.slack.com/services/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"
	pgpKey           = "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBGVxk3sBCADJ7l0zq8m3RvW2pT5nYk9xHc4LbQe1sFdUoAiGjZ\n=Ab12\n-----END PGP PRIVATE KEY BLOCK-----"
)

func newRedactor() *bot.Redactor {
	return bot.NewRedactor([]string{configuredSecret, specialSecret, "abc", "  ", "dact"})
}

func TestRedact(t *testing.T) {
	r := newRedactor()
	tests := []struct {
		name, in, want string
	}{
		{"slack bot token", "token xoxb-1234567890-0987654321-AbCdEfGh here", "token [redacted] here"},
		{"slack user token", "xoxp-1234567890-abcdefghij", "[redacted]"},
		{"slack app token", "SLACK_APP_TOKEN=xapp-1-A0123456789-1234567890-abcdef", "SLACK_APP_TOKEN=[redacted]"},
		{"openai key", "OPENAI_API_KEY=" + openaiKey, "OPENAI_API_KEY=[redacted]"},
		{"github classic", githubToken + " ok", "[redacted] ok"},
		{"github fine-grained", "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", "[redacted]"},
		{"aws key id", "aws_access_key_id = AKIAIOSFODNN7EXAMPLE", "aws_access_key_id = [redacted]"},
		{"aws secret in a credentials file", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n", "aws_secret_access_key = [redacted]\n"},
		{"aws secret in the environment", "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "AWS_SECRET_ACCESS_KEY=[redacted]"},
		{"secret-named variables", "DB_PASSWORD=hunter2hunter2\nexport STRIPE_API_KEY=\"rk_live_51Habc0123\"", "DB_PASSWORD=[redacted]\nexport STRIPE_API_KEY=\"[redacted]\""},
		{"password in a URL", "DATABASE_URL=postgres://app:s3cr3t-pw@db.internal:5432/app", "DATABASE_URL=postgres://app:[redacted]@db.internal:5432/app"},
		{"discord bot token", "discord: MTA4NjM0NTY3ODkwMTIzNDU2Nw.GabcDE.abcdefghijklmnopqrstuvwxyz012345", "discord: [redacted]"},
		{"bearer", "Authorization: Bearer abc.def-ghi_jkl", "Authorization: Bearer [redacted]"},
		{"jwt", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", "[redacted]"},
		{"private key", "x\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjE=\n-----END OPENSSH PRIVATE KEY-----\ny", "x\n[redacted]\ny"},
		{"cut private key", "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA", "[redacted]"},
		{"configured value", "the password is " + configuredSecret + ".", "the password is [redacted]."},
		{"a secret that redacting another reveals", configuredSecret + "AKIAIOSFODNN7EXAMPLE", "[redacted][redacted]"},
		{"short configured values are ignored", "abc and spaces", "abc and spaces"},
		{"ordinary text", "sk-short, task-1234, xoxb- and a skeleton key", "sk-short, task-1234, xoxb- and a skeleton key"},
		{"ordinary settings and addresses", "MAX_TOKENS=4096, TOKEN_LIMIT=short, http://localhost:8080/a@b, me@example.com",
			"MAX_TOKENS=4096, TOKEN_LIMIT=short, http://localhost:8080/a@b, me@example.com"},
		{"ordinary prose about secrets", "Rotate the API key and the password, then restart the bypass service.",
			"Rotate the API key and the password, then restart the bypass service."},

		{"an allowlisted value", `{"api_client_class": "ProductionRequestHandlerFactory"}`, `{"api_client_class": "ProductionRequestHandlerFactory"}`},
		{"a value of low entropy", `{"api_version_string": "2024.01.01.1000"}`, `{"api_version_string": "2024.01.01.1000"}`},
		{"a value of low entropy after a name", `api_ref = "ababababab12"`, `api_ref = "ababababab12"`},

		// The classes of issue 15, finding 4.
		{"pgp private key block", "key:\n" + pgpKey + "\nend", "key:\n[redacted]\nend"},
		{"cut pgp private key block", "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBGVxk3sBCADJ7l0zq8m3", "[redacted]"},
		{"authorization basic", "Authorization: Basic ZGVwbG95Omh1bnRlcjI=\r\n", "Authorization: Basic [redacted]\r\n"},
		{"authorization basic in curl", `curl -H "authorization: basic dXNlcjpwYXNzd29yZA==" https://x`, `curl -H "authorization: basic [redacted]" https://x`},
		{"stripe live key", "STRIPE=" + stripeKey + ".", "STRIPE=[redacted]."},
		{"lower-case password", "login with user=admin password=hunter2 now", "login with user=admin password=[redacted] now"},
		{"json db_password", `{"db_host": "db", "db_password": "s3cr3t!x"}`, `{"db_host": "db", "db_password": "[redacted]"}`},
		{"api_key in a URL", "GET https://api.example.com/v1/items?api_key=Zk3j9aQ2mXw&page=2", "GET https://api.example.com/v1/items?api_key=[redacted]&page=2"},
		{"access_token in a URL", "https://graph.example.com/me?fields=id&access_token=EAAB9x2kLmQ7 done", "https://graph.example.com/me?fields=id&access_token=[redacted] done"},
		{"google api key", "maps key " + googleKey + ", see docs", "maps key [redacted], see docs"},
		{"gitlab token", "CI uses " + gitlabToken, "CI uses [redacted]"},
		{"hugging face token", "HF token: " + hfToken + "\n", "HF token: [redacted]\n"},
		{"slack webhook", "post to " + slackWebhook + " daily", "post to [redacted] daily"},
		{"token split by a zero-width space", "ghp_R7kQ2mN9pL4vT8\u200bwZ3yBx5cV1dF6gH0jK2lM4 ok", "[redacted] ok"},
		{"configured value split by a zero-width joiner", "hunter2-corr\u200dect-horse", "[redacted]"},
		{"token split by a byte that is not UTF-8", "ghp_R7kQ2mN9pL4vT8\xffwZ3yBx5cV1dF6gH0jK2lM4 ok", "[redacted] ok"},
		{"token split by a soft hyphen and a BOM", "glpat-xR7kQ2\u00admN9pL4\ufeffvT8wZ3yB", "[redacted]"},
		{"tail after emphasis", "key sk-proj-AbCdEfGhIjKlMnOp*QrStUvWx0123* end", "key [redacted]* end"},
		{"token inside strike and code", "~" + githubToken[:20] + "~`" + githubToken[20:] + "`", "~[redacted]`"},
		{"configured value split by emphasis", "pw: hunter2-*correct*-horse", "pw: [redacted]"},
		{"token split by an underline", "AIzaSyD3kF9x0Qm2Lp__7vT1nB8cR4eW6yU5iO0aZ__ ok", "[redacted]__ ok"},
		{"token split by a spoiler", "||ghp_R7kQ2mN9pL4vT8||wZ3yBx5cV1dF6gH0jK2lM4", "||[redacted]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := r.Redact(tt.in)
			if got != tt.want {
				t.Errorf("Redact(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if again := r.Redact(got); again != got {
				t.Errorf("Redact is not stable: %q then %q", got, again)
			}
		})
	}
}

// TestRedactEncodedSecrets plants configured secrets in the forms tools print them in: the
// encoded text must go, whatever surrounds it.
func TestRedactEncodedSecrets(t *testing.T) {
	r := newRedactor()
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	tests := []struct {
		name, in string
		gone     []string
	}{
		{"base64", "blob " + b64(configuredSecret) + " end", []string{b64(configuredSecret)[:24]}},
		{"base64 after one byte", "blob " + b64("x"+configuredSecret) + " end", []string{b64("x" + configuredSecret)[4:24]}},
		{"base64 after two bytes", "blob " + b64(`{"`+configuredSecret+`"}`) + " end", []string{b64(`{"` + configuredSecret)[4:24]}},
		{"base64 after three bytes", "blob " + b64("pw="+configuredSecret) + " end", []string{b64("pw=" + configuredSecret)[4:24]}},
		{"url-safe base64", "t=" + base64.URLEncoding.EncodeToString([]byte("??"+specialSecret+"??")), []string{base64.URLEncoding.EncodeToString([]byte("??" + specialSecret))[4:20]}},
		{"query-escaped", "next=/login%3Fpw%3D" + url.QueryEscape(specialSecret) + "&x=1", []string{url.QueryEscape(specialSecret)}},
		{"path-escaped", "GET /vault/" + url.PathEscape(specialSecret) + "/read", []string{url.PathEscape(specialSecret)}},
		{"lower-case escapes", "q=" + strings.ToLower(url.QueryEscape(specialSecret)), []string{"p%40ss%2fw0rd%2bk3y%21z"}},
		{"hex", "dump 0x" + hex.EncodeToString([]byte(configuredSecret)), []string{hex.EncodeToString([]byte(configuredSecret))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := r.Redact(tt.in)
			for _, g := range tt.gone {
				if strings.Contains(got, g) {
					t.Errorf("Redact(%q) = %q still holds %q", tt.in, got, g)
				}
			}
			if !strings.Contains(got, "[redacted]") {
				t.Errorf("Redact(%q) = %q redacts nothing", tt.in, got)
			}
		})
	}
}

// TestSecretClassesAreNeverPosted runs the classes above through a bot: a tool prints them,
// the model repeats them in its answer, and nothing posted holds one.
func TestSecretClassesAreNeverPosted(t *testing.T) {
	secrets := []string{pgpKey, "ZGVwbG95Omh1bnRlcjI=", stripeKey, "hunter2x", "s3cr3t!x", "Zk3j9aQ2mXw", googleKey, gitlabToken, hfToken,
		slackWebhook[len("https://"):], configuredSecret, base64.StdEncoding.EncodeToString([]byte(configuredSecret))[:24]}
	dump := strings.Join([]string{
		pgpKey, "Authorization: Basic ZGVwbG95Omh1bnRlcjI=", "stripe " + stripeKey, "password=hunter2x",
		`{"db_password": "s3cr3t!x"}`, "https://api.example.com/v1?api_key=Zk3j9aQ2mXw&page=2", "maps " + googleKey,
		"gitlab " + gitlabToken, "hf " + hfToken, slackWebhook,
		"encoded " + base64.StdEncoding.EncodeToString([]byte(configuredSecret)),
	}, "\n")
	// The answer hides some of them from patterns: zero-width characters and emphasis.
	answer := "Found: *" + googleKey[:12] + "*" + googleKey[12:] + " and " + gitlabToken[:10] + "\u200b" + gitlabToken[10:] +
		" and " + configuredSecret[:7] + "__" + configuredSecret[7:] + "__ and " + hfToken + "."
	bubble(t, func(t *testing.T) {
		env := &tool{name: "env", risk: agent.RiskSafe, out: dump}
		h := newHarness(t, bot.Config{Redact: []string{configuredSecret}}, env)
		h.model.add(use("env", `{}`), say(answer))
		h.mention(ann, "show me the environment")
		h.settle()
		sent := h.plat.allText()
		if len(h.plat.sent(bot.KindAnswer)) != 1 {
			t.Fatalf("no answer posted:\n%s", sent)
		}
		for _, s := range secrets {
			if strings.Contains(sent, s) {
				t.Errorf("%q was posted", s)
			}
		}
		for _, s := range []string{googleKey[12:], gitlabToken[10:], configuredSecret[7:]} {
			if strings.Contains(sent, s) {
				t.Errorf("the tail %q of a hidden secret was posted", s)
			}
		}
	})
}

// FuzzRedact plants a Slack token and a configured secret, plain and base64-encoded, in
// arbitrary text: none may survive, whatever surrounds them, and redacting twice changes
// nothing.
func FuzzRedact(f *testing.F) {
	f.Add("hello", []byte("tokenbytes"), []byte{1, 2, 3, 4})
	f.Add("xoxb-", []byte("A"), []byte("-----BEGIN"))
	f.Add("Bearer ", []byte{0xff, 0x00}, []byte("sk-"))
	f.Add("password=*x*\u200b", []byte("Authorization: Basic"), []byte("_~`|"))
	f.Add("https://u:p@h/?api_key=", []byte("AIza"), []byte("\x1b]0;"))
	f.Fuzz(func(t *testing.T, text string, tok, sec []byte) {
		// The planted values are shaped like real ones: a Slack token of at least ten
		// characters, and a configured value of uppercase hex, which "[redacted]" cannot
		// spell.
		token := "xoxb-" + hex.EncodeToString(append(tok, make([]byte, 5)...))
		secret := "S" + strings.ToUpper(hex.EncodeToString(append(sec, 0xAB, 0xCD)))
		r := bot.NewRedactor([]string{secret})
		encoded := base64.StdEncoding.EncodeToString([]byte(secret))
		in := text + " " + token + " " + text + " " + secret + " " + text + " " + encoded + " " + text
		out := r.Redact(in)
		if strings.Contains(out, token) || strings.Contains(out, secret) {
			t.Fatalf("Redact(%q) = %q still holds a secret", in, out)
		}
		if inner := encoded[:len(encoded)-4]; len(inner) >= 8 && strings.Contains(out, inner) {
			t.Fatalf("Redact(%q) = %q still holds the base64 of a secret", in, out)
		}
		if again := r.Redact(out); again != out {
			t.Fatalf("Redact is not stable: %q then %q", out, again)
		}
		if again := r.Redact(text); again != r.Redact(again) {
			t.Fatalf("Redact is not stable on %q", text)
		}
	})
}
