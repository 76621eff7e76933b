package web

import (
	"html/template"
	"strings"
	"testing"
)

// TestIndexPageMatchesHTMLTemplate renders the console's page as html/template renders it,
// which the console used before: the same bytes for no banner, either banner, both, and
// text that needs escaping.
func TestIndexPageMatchesHTMLTemplate(t *testing.T) {
	raw := indexHTML
	want := template.Must(template.New("index").Parse(raw))
	page, err := parseIndexPage(raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ banner, warning string }{
		{"", ""},
		{"Staging: runs here touch the test workspace", ""},
		{"", "approver rules cannot be enforced"},
		{`<script>alert("x")</script> & 'quotes' + a+b`, "nul\x00 <b>bold</b> é ü 日本"},
	} {
		var b strings.Builder
		if err := want.Execute(&b, struct{ Banner, Warning string }{tt.banner, tt.warning}); err != nil {
			t.Fatal(err)
		}
		got := page.render(map[string]string{"Banner": tt.banner, "Warning": tt.warning})
		if got != b.String() {
			t.Errorf("banner %q, warning %q:\n got %q\nwant %q", tt.banner, tt.warning, got, b.String())
		}
	}
}

// TestIndexPageRefusesOtherActions: a page edited to use more of the template language than
// the renderer knows fails at start instead of showing its braces.
func TestIndexPageRefusesOtherActions(t *testing.T) {
	for _, page := range []string{
		"<p>{{.Banner}}</p>",
		"{{if .Banner}}<p>{{.Warning}}</p>{{end}}",
		"{{range .Items}}x{{end}}",
		"{{if .Banner}}<b>{{.Banner}}</b>{{end}} {{/* note */}}",
	} {
		if _, err := parseIndexPage(page); err == nil {
			t.Errorf("parseIndexPage(%q) succeeded", page)
		}
	}
}
