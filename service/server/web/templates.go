package web

import (
	"html/template"
	"net/url"
)

// pageNames are the page templates; each is parsed with layout.html.
var pageNames = []string{"vrfs", "tree", "prefix", "search"}

// parseTemplates parses every page with the layout. The templates are
// embedded, so a parse error is a build defect: it panics.
func parseTemplates() map[string]*template.Template {
	funcs := template.FuncMap{
		"vrfURL": func(name string) string { return "/vrf/" + url.PathEscape(name) },
		"prev":   func(n int) int { return n - 1 },
		"dots":   func(n int) []struct{} { return make([]struct{}, n) },
	}
	out := make(map[string]*template.Template, len(pageNames))
	for _, n := range pageNames {
		out[n] = template.Must(template.New(n).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+n+".html"))
	}
	return out
}
