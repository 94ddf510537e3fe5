package registry

import (
	"slices"
	"testing"
)

func TestBM25Terms(t *testing.T) {
	cases := map[string][]string{
		"repos/list-for-org":           {"repo", "list", "org"},
		"listForOrg":                   {"list", "org"},
		"HTTPServer_getURL2":           {"http", "server", "get", "url2"},
		"github.repos_get":             {"github", "repo", "get"},
		"Create a pull request":        {"creat", "pull", "request"},
		"repositories, created, lists": {"repository", "creat", "list"},
		"the zen of GitHub":            {"zen", "git", "hub"},
		"listing pending branches":     {"list", "pend", "branch"},
		"Ünïcode Wörter":               {"ünïcod", "wörter"},
		"":                             nil,
	}
	for in, want := range cases {
		var got []string
		bm25Terms(in, func(s string) { got = append(got, s) })
		if !slices.Equal(got, want) {
			t.Errorf("bm25Terms(%q) = %q, want %q", in, got, want)
		}
	}
}
