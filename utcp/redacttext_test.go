package utcp_test

import (
	"encoding/json"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/utcpd/utcpd/utcp"
)

const R = utcp.Redacted

func TestRedactTextShapes(t *testing.T) {
	cases := []struct{ name, in, want string }{
		// URL query values of secret-looking names.
		{"api_key", "GET https://api.example.test/v1?api_key=SECRET123&format=json", "GET https://api.example.test/v1?api_key=" + R + "&format=json"},
		{"apikey", "https://h/?apikey=abc", "https://h/?apikey=" + R},
		{"key", "https://maps.test/api?key=abc&q=x", "https://maps.test/api?key=" + R + "&q=x"},
		{"token", "https://h/x?token=t0k", "https://h/x?token=" + R},
		{"access_token", "https://h/x?a=1&access_token=zz#frag", "https://h/x?a=1&access_token=" + R + "#frag"},
		{"secret", "https://h/x?client_secret=s3", "https://h/x?client_secret=" + R},
		{"password", "https://h/x?password=hunter2", "https://h/x?password=" + R},
		{"sig", "https://blob.test/c?sv=2020&sig=abc%2Fdef", "https://blob.test/c?sv=2020&sig=" + R},
		{"signature", "https://s3.test/o?X-Amz-Signature=ff00&X-Amz-Credential=AK%2F1", "https://s3.test/o?X-Amz-Signature=" + R + "&X-Amz-Credential=" + R},
		{"auth", "https://h/?auth=xyz", "https://h/?auth=" + R},
		{"x-api-key", "https://h/?x-api-key=xyz", "https://h/?x-api-key=" + R},
		{"upper case", "https://h/?API_KEY=xyz", "https://h/?API_KEY=" + R},
		{"quoted url", `url "https://h/?api_key=abc" is bad`, `url "https://h/?api_key=` + R + `" is bad`},
		// Userinfo and DSNs.
		{"userinfo", "https://alice:pa55@h.test/x", "https://alice:" + R + "@h.test/x"},
		{"userinfo with @", "https://alice:p@ss@h.test/x", "https://alice:" + R + "@h.test/x"},
		{"dollar password", "password=$ecret99 user=u", "password=" + R + " user=u"},
		{"postgres dsn", "postgres://user:pass@127.0.0.1:5432/db?sslmode=disable", "postgres://user:" + R + "@127.0.0.1:5432/db?sslmode=disable"},
		{"dsn query password", "postgres://u@h/db?password=pw&sslmode=disable", "postgres://u@h/db?password=" + R + "&sslmode=disable"},
		{"key=value dsn", "host=127.0.0.1 user=app password=hunter2 dbname=x", "host=127.0.0.1 user=app password=" + R + " dbname=x"},
		{"key=value quoted", "host=h password='a b c' dbname=x", "host=h password='" + R + "' dbname=x"},
		{"semicolon dsn", "Server=h;User Id=u;Password=pw;Database=d", "Server=h;User Id=u;Password=" + R + ";Database=d"},
		{"mysql dsn", "dsn user:pw@tcp(127.0.0.1:3306)/db", "dsn user:" + R + "@tcp(127.0.0.1:3306)/db"},
		{"flag", "run --token=abc --verbose", "run --token=" + R + " --verbose"},
		{"json pair", `body {"api_key": "abc", "q": "x"}`, `body {"api_key": "` + R + `", "q": "x"}`},
		// Token shapes.
		{"openai", "key sk-abcdefghijklmnop1234567890ABCD here", "key sk-" + R + " here"},
		{"openai project", "sk-proj-Ab3dEfGhIjKlMnOpQrStUvWx_yz-0123", "sk-" + R},
		{"anthropic", "x=sk-ant-api03-AbCdEfGhIjKlMnOpQrStUv-wxyz0123", "x=sk-" + R},
		{"github classic", "token ghp_0123456789abcdefghijABCDEFGHIJklmnop", "token ghp_" + R},
		{"github oauth", "gho_0123456789abcdefghijABCDEFGHIJklmnop", "gho_" + R},
		{"github server", "ghs_0123456789abcdefghijABCDEFGHIJklmnop.", "ghs_" + R + "."},
		{"github user", "ghu_0123456789abcdefghijABCDEFGHIJklmnop", "ghu_" + R},
		{"github refresh", "ghr_0123456789abcdefghijABCDEFGHIJklmnop", "ghr_" + R},
		{"github fine-grained", "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", "github_pat_" + R},
		{"slack bot", "xoxb-1234567890-0987654321-AbCdEfGhIj", "xoxb-" + R},
		{"slack user", "(xoxp-1234567890-abcdefghij)", "(xoxp-" + R + ")"},
		{"aws", "id AKIAIOSFODNN7EXAMPLE!", "id AKIA" + R + "!"},
		{"aws session", "ASIAIOSFODNN7EXAMPLE", "ASIA" + R},
		{"google", "AIzaSyA-0123456789abcdefghijklmnopqrstu", "AIza" + R},
		{"stripe live", "sk_live_0123456789abcdefABCD", "sk_live_" + R},
		{"stripe restricted", "rk_live_0123456789abcdefABCD", "rk_live_" + R},
		{"jwt", "tok eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c end", "tok " + R + " end"},
		{"bearer", "Authorization: Bearer abc123def456", "Authorization: Bearer " + R},
		{"bearer lower", "bearer AbCdEfGhIjKl", "bearer " + R},
		{"basic", "Basic dXNlcjpwYXNzd29yZA==", "Basic " + R},
		{"pem", "k=-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nabc\n-----END RSA PRIVATE KEY-----\nnext", "k=" + R + "\nnext"},
		{"pem unterminated", "-----BEGIN PRIVATE KEY-----\nMIIEow", R},
		{"two", "a sk-abcdefghijklmnop1234567890 b ghp_0123456789abcdefghijABCDEFGHIJklmnop c", "a sk-" + R + " b ghp_" + R + " c"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := utcp.RedactText(c.in); got != c.want {
				t.Errorf("RedactText(%q)\n got %q\nwant %q", c.in, got, c.want)
			}
			if !utcp.HasSecretText(c.in) {
				t.Errorf("HasSecretText(%q) = false", c.in)
			}
		})
	}
}

func TestRedactTextLeavesOrdinaryText(t *testing.T) {
	for _, s := range []string{
		"",
		"call demo.add: ok",
		"https://api.example.test/v1/users/{id}?format=json&page=2",
		"https://api.example.test/v1?api_key=${API_KEY}&x=1",
		"https://api.example.test/v1?token={token}",
		"https://api.example.test/v1?api_key=" + R,
		"postgres://user@127.0.0.1/db",
		"postgres://user:${PGPASSWORD}@127.0.0.1/db",
		"password=$PGPASSWORD host=h",
		"mailto:alice@example.test and bob@example.test",
		"user@host:path",
		"the risk-assessment task-management disk-usage desk-lamp",
		"sk-learn is a library; use sk-this-is-not-a-key-at-all-really",
		"ghp_short",
		"github_pat_ is the prefix",
		"xoxb- is a Slack prefix",
		"AKIA is an AWS prefix; AKIAIOSFODNN7EXAMPLEXX is too long",
		"AIza prefix",
		"eyJ is the start of a JWT; eyJhbGciOiJIUzI1NiJ9 alone has no dots",
		"Bearer authentication and Bearer Authentication are words, so is Basic auth",
		"Bearer ${TOKEN}",
		"sort --key=2 file",
		"max_tokens=100 temperature=0.2",
		"a=b c=d monkey=banana",
		"x == y, a != b",
		"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
		"--------- a line of dashes -----",
		`{"name": "m", "url": "https://x"}`,
		"日本語のテキスト sk-日本語",
	} {
		if got := utcp.RedactText(s); got != s {
			t.Errorf("RedactText(%q) = %q, want it unchanged", s, got)
		}
		if utcp.HasSecretText(s) {
			t.Errorf("HasSecretText(%q) = true", s)
		}
	}
}

func TestRedactURL(t *testing.T) {
	u, err := url.Parse("https://alice:pw@api.example.test/bot123456:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/send?api_key=SECRET&x=1#frag")
	if err != nil {
		t.Fatal(err)
	}
	got := utcp.RedactURL(u)
	if want := "https://api.example.test/bot123456:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/send?…"; got != want {
		t.Errorf("RedactURL = %q, want %q", got, want)
	}
	u, _ = url.Parse("https://h.test/v1/ghp_0123456789abcdefghijABCDEFGHIJklmnop/x")
	if got := utcp.RedactURL(u); strings.Contains(got, "0123456789abcdef") {
		t.Errorf("a token in the path survived: %q", got)
	}
	if got := utcp.RedactURLString("http://[::1"); got != "(invalid URL)" {
		t.Errorf("invalid URL: %q", got)
	}
}

// TestRedactByValue: Redact walks JSON and redacts every string by value
// as well as secret-named fields by name.
func TestRedactByValue(t *testing.T) {
	in := `{"url": "https://api.example.test/v1?api_key=SECRET123&format=json",
	 "args": {"prompt": "use sk-proj-Ab3dEfGhIjKlMnOpQrStUvWx0123 please", "list": ["ghp_0123456789abcdefghijABCDEFGHIJklmnop", 3]},
	 "db": "postgres://app:dbpass@127.0.0.1/app", "token_url": "https://auth.test/token?client_secret=cs"}`
	out := string(utcp.Redact(json.RawMessage(in)))
	for _, secret := range []string{"SECRET123", "Ab3dEfGhIjKlMnOp", "0123456789abcdefghij", "dbpass", "=cs"} {
		if strings.Contains(out, secret) {
			t.Errorf("%q survived: %s", secret, out)
		}
	}
	for _, kept := range []string{"format=json", "please", "127.0.0.1/app", "https://auth.test/token"} {
		if !strings.Contains(out, kept) {
			t.Errorf("%q was lost: %s", kept, out)
		}
	}
}

// TestSecretNameMatchesTheOldPattern: SecretName, which replaced a
// regular expression, says the same about every name.
func TestSecretNameMatchesTheOldPattern(t *testing.T) {
	old := regexp.MustCompile(`(?i)(api[_-]?key|apikey|token|secret|password|passwd|authorization|auth|credential|cookie|session|private[_-]?key)`)
	for _, k := range []string{"Authorization", "X-Api-Key", "api_key", "APIKEY", "apiKey", "GITHUB_TOKEN", "client_secret",
		"password", "PASSWD", "auth", "OAuth", "credentials", "Cookie", "session_id", "private_key", "Private-Key", "privatekey",
		"Accept", "PATH", "name", "url", "var_name", "key", "monkey", "Content-Type", "api.key", "x"} {
		if got, want := utcp.SecretName(k), old.MatchString(k); got != want {
			t.Errorf("SecretName(%q) = %v, the pattern says %v", k, got, want)
		}
	}
}

// TestRedactTextIsLinear: inputs built to make a scanner back up or
// rescan finish quickly.
func TestRedactTextIsLinear(t *testing.T) {
	for _, s := range []string{
		strings.Repeat("sk-", 200_000),
		strings.Repeat("a", 300_000) + "=",
		strings.Repeat("x=", 300_000),
		strings.Repeat("eyJabcdefghij", 50_000),
		strings.Repeat("github_pat_", 50_000),
		strings.Repeat("a:@", 200_000),
		"x://" + strings.Repeat("a:${X}@", 100_000),
		strings.Repeat("x://a:@", 100_000),
		strings.Repeat("-----BEGIN ", 50_000),
		strings.Repeat("AKIA", 150_000),
		strings.Repeat("bearer ", 80_000),
		strings.Repeat(`"":`, 200_000),
	} {
		start := time.Now()
		utcp.RedactText(s)
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("RedactText of %d bytes starting %q took %v", len(s), s[:16], d)
		}
	}
}

func TestRedactTextDoesNotAllocateOnCleanText(t *testing.T) {
	s := "call demo.add outcome=ok duration=1.2ms https://api.example.test/v1?format=json"
	if n := testing.AllocsPerRun(100, func() { _ = utcp.RedactText(s) }); n != 0 {
		t.Errorf("RedactText of clean text: %v allocations", n)
	}
	if n := testing.AllocsPerRun(100, func() { _ = utcp.SecretName("a_rather_long_attribute_name_that_is_longer_than_64_bytes_for_sure_x") }); n != 0 {
		t.Errorf("SecretName: %v allocations", n)
	}
}

func FuzzRedactText(f *testing.F) {
	for _, s := range []string{"https://u:p@h/?api_key=x", "sk-abcdefghijklmnop1234567890", "password='a", `"token": "x`, "-----BEGIN PRIVATE KEY-----"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := utcp.RedactText(s)
		if utcp.HasSecretText(s) != (out != s) {
			t.Errorf("HasSecretText(%q) disagrees with RedactText = %q", s, out)
		}
	})
}

func BenchmarkRedactText(b *testing.B) {
	for _, c := range []struct{ name, s string }{
		{"clean-short", "demo.add"},
		{"clean-line", "call tool=demo.add qualified=demo.add protocol=http outcome=ok duration=1.2ms guard=allow"},
		{"clean-url", "GET https://api.example.test/v1/users/42?format=json&page=2 answered HTTP 502 Bad Gateway"},
		{"secret-url", "GET https://api.example.test/v1?api_key=SECRET123&format=json answered HTTP 502"},
		{"token", "the key is sk-proj-Ab3dEfGhIjKlMnOpQrStUvWx0123 and ghp_0123456789abcdefghijABCDEFGHIJklmnop"},
		{"clean-4k", strings.Repeat("the quick brown fox jumps over the lazy dog; ", 90)},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.s)))
			b.ReportAllocs()
			for b.Loop() {
				_ = utcp.RedactText(c.s)
			}
		})
	}
}
