package web

import (
	"fmt"
	"regexp"
	"strings"
)

// indexPage is the console's page, static/index.html, whose only dynamic parts are
// optional banners: {{if .Field}}before{{.Field}}after{{end}}, shown when the field is set,
// with the field's text escaped as html/template escapes text in HTML.
//
// It is rendered here rather than with html/template because text/template calls methods
// by name through reflection, and a binary that may do that keeps every exported method of
// every type it links: html/template made the binary 6 MB larger, of which the idle daemon
// mapped 2.2 MB. TestIndexPageMatchesHTMLTemplate holds the two to the same output.
type indexPage struct {
	parts []indexPart
}

// indexPart is fixed text, or a banner shown when field is set.
type indexPart struct {
	text                 string
	field, before, after string
}

// parseIndexPage splits the page at its banners and refuses any other template action, so
// that a page edited beyond what this renders fails at start (and in every test).
func parseIndexPage(page string) (*indexPage, error) {
	// The one construct the page may use; compiled here, not at init, as New runs once.
	banner := regexp.MustCompile(`\{\{if \.(\w+)\}\}(.*?)\{\{\.(\w+)\}\}(.*?)\{\{end\}\}`)
	var p indexPage
	last := 0
	for _, m := range banner.FindAllStringSubmatchIndex(page, -1) {
		field, shown := page[m[2]:m[3]], page[m[6]:m[7]]
		if field != shown {
			return nil, fmt.Errorf("banner {{if .%s}} shows {{.%s}}", field, shown)
		}
		p.parts = append(p.parts, indexPart{text: page[last:m[0]]},
			indexPart{field: field, before: page[m[4]:m[5]], after: page[m[8]:m[9]]})
		last = m[1]
	}
	p.parts = append(p.parts, indexPart{text: page[last:]})
	for _, part := range p.parts {
		if strings.Contains(part.text+part.before+part.after, "{{") {
			return nil, fmt.Errorf("index page: a template action other than {{if .Field}}...{{.Field}}...{{end}}")
		}
	}
	return &p, nil
}

// render writes the page with the banners whose fields are set.
func (p *indexPage) render(fields map[string]string) string {
	var b strings.Builder
	for _, part := range p.parts {
		if part.field == "" {
			b.WriteString(part.text)
			continue
		}
		if v := fields[part.field]; v != "" {
			b.WriteString(part.before)
			b.WriteString(htmlTextEscaper.Replace(v))
			b.WriteString(part.after)
		}
	}
	return b.String()
}

// htmlTextEscaper escapes text in HTML as html/template does (its htmlEscaper).
var htmlTextEscaper = strings.NewReplacer("\x00", "\uFFFD", `"`, "&#34;", "&", "&amp;", "'", "&#39;", "+", "&#43;", "<", "&lt;", ">", "&gt;")
