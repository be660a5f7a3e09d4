package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/hookdtype"
)

// Hook files: hooks kept as YAML or JSON, one document per hook (YAML may hold several, separated
// by ---), in the shape of the admin API. Secrets are never written in them: a secret field holds
// ${NAME}, read from the environment when the file is applied.

// isTestFile says a file holds `hookd policy test` cases rather than hooks.
func isTestFile(path string) bool {
	base := strings.ToLower(filepath.Base(path))
	for _, suffix := range []string{"_test.yaml", "_test.yml", "_test.json"} {
		if strings.HasSuffix(base, suffix) {
			return true
		}
	}
	return false
}

// filesOf lists path (a file) or the hook or test files in path (a directory, not recursive),
// sorted. A test file named as hooks are applied from is refused: applied alone its hooks would
// be created, and applied with its directory, which skips it, deleted.
func filesOf(path string, tests bool) ([]string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		if !tests && isTestFile(path) {
			return nil, fmt.Errorf("%s is named as a policy test file (*_test.yaml, *_test.yml, *_test.json), which hooks apply skips in a directory: rename it to keep hooks in it", path)
		}
		return []string{path}, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		ext := strings.ToLower(filepath.Ext(e.Name()))
		if e.IsDir() || (ext != ".yaml" && ext != ".yml" && ext != ".json") || isTestFile(e.Name()) != tests {
			continue
		}
		out = append(out, filepath.Join(path, e.Name()))
	}
	sort.Strings(out)
	return out, nil
}

// yamlDocuments decodes every document of a YAML (or JSON) file as JSON.
func yamlDocuments(path string) ([]json.RawMessage, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var out []json.RawMessage
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		j, err := yamlJSON(nil, &doc)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if string(j) == "null" {
			continue // an empty document
		}
		out = append(out, j)
	}
}

// maxHookFileJSON is the daemon's request body limit: a document that expands past it could not
// be sent anyway.
const maxHookFileJSON = 1 << 20

// yamlJSON appends the JSON of the YAML node n to b, each scalar as it is written where JSON can
// say it so: an unquoted date (2026-01-01) stays that text, where decoding it would make it a
// time and the JSON an RFC 3339 timestamp that no rule comparing the text matches, and a number
// keeps its digits (a float64 would round a long one). Other scalars (0x1F, true) are what YAML
// decodes them to. A merge key (<<) is refused: its mapping would be decoded whole, past these
// checks (<<: {agentId: 05001} was agent 2561), and a hooks file is clearer with its keys written
// out. An alias is read through its anchor, checked there.
func yamlJSON(b []byte, n *yaml.Node) ([]byte, error) {
	if len(b) > maxHookFileJSON {
		// Aliases nested in aliases expand exponentially: 600 bytes of them took gigabytes.
		return nil, fmt.Errorf("line %d: the document expands to more than %d bytes of JSON (aliases repeating aliases?), more than the daemon takes in a request",
			n.Line, maxHookFileJSON)
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return append(b, "null"...), nil
		}
		return yamlJSON(b, n.Content[0])
	case yaml.AliasNode:
		return yamlJSON(b, n.Alias)
	case yaml.SequenceNode:
		b = append(b, '[')
		for i, e := range n.Content {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = yamlJSON(b, e); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case yaml.MappingNode:
		b = append(b, '{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			if i > 0 {
				b = append(b, ',')
			}
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("line %d: a key is not a scalar", k.Line)
			}
			if k.Tag == "!!merge" {
				return nil, fmt.Errorf("line %d: a merge key (<<) is not taken in hook and test files; write the keys it merges out in this mapping", k.Line)
			}
			b = hookdtype.AppendJSONString(b, k.Value)
			b = append(b, ':')
			var err error
			if b, err = yamlJSON(b, n.Content[i+1]); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	}
	switch n.Tag {
	case "!!str", "!!timestamp":
		return hookdtype.AppendJSONString(b, n.Value), nil
	case "!!int", "!!float":
		if hookdtype.Valid([]byte(n.Value)) && n.Value[0] != '"' {
			return append(b, n.Value...), nil
		}
		// Hexadecimal reads alike everywhere. The rest do not: 05001 is octal to YAML 1.1 (2561)
		// and decimal to 1.2, 0o…, 1_000 and .inf are numbers to some tools and text to others,
		// so a number that does not read the same everywhere is refused.
		if v := strings.TrimLeft(n.Value, "+-"); !strings.HasPrefix(v, "0x") {
			return nil, fmt.Errorf("line %d: %s is not a number as JSON writes it, and YAML tools disagree on what it is; write it in decimal without leading zeros, or quote it",
				n.Line, n.Value)
		}
	}
	var v any
	if err := n.Decode(&v); err != nil {
		return nil, err
	}
	j, err := json.Marshal(v)
	return append(b, j...), err
}

// loadHooks reads the hooks of files, checked as the daemon would check them (so a typo fails
// here, before anything is sent), with their ${NAME} secrets read from the environment. With
// policiesOnly (policy test, which sends nothing), the webhook hooks are read strictly but left
// out, their secrets unread: a test of a policy needs no receiver's secret.
func loadHooks(files []string, policiesOnly bool) ([]dispatcher.Hook, error) {
	var hooks []dispatcher.Hook
	where := map[string]string{}
	for _, f := range files {
		docs, err := yamlDocuments(f)
		if err != nil {
			return nil, err
		}
		for i, doc := range docs {
			at := fmt.Sprintf("%s (document %d)", f, i+1)
			var h dispatcher.Hook
			if err := hookdtype.DecodeStrict(doc, &h, ""); err != nil {
				return nil, fmt.Errorf("%s: %w", at, err)
			}
			if h.ID != 0 || h.CreatedAt != nil || h.UpdatedAt != nil || h.SecretUnreadable {
				return nil, fmt.Errorf("%s: id, createdAt, updatedAt and secretUnreadable belong to the daemon, not to a hook file", at)
			}
			if policiesOnly && dispatchType(h) != dispatcher.DispatchPolicy {
				continue
			}
			if err := expandSecrets(&h); err != nil {
				return nil, fmt.Errorf("%s: %w", at, err)
			}
			check := h
			if err := check.Normalize(); err != nil {
				return nil, fmt.Errorf("%s: %w", at, err)
			}
			if prev, dup := where[check.HookName]; dup {
				return nil, fmt.Errorf("%s: hookName %q is also in %s; hooks are matched by name", at, check.HookName, prev)
			}
			where[check.HookName] = at
			h.HookName = check.HookName
			hooks = append(hooks, h)
		}
	}
	return hooks, nil
}

var secretRef = regexp.MustCompile(`^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$`)

// expandSecrets replaces each secret field of h written as ${NAME} by the environment variable
// NAME. A secret written out literally is refused: the file would keep it in git.
func expandSecrets(h *dispatcher.Hook) error {
	expand := func(field string, v *string) error {
		if v == nil || *v == "" {
			return nil
		}
		m := secretRef.FindStringSubmatch(*v)
		if m == nil {
			return hookdtype.Invalid(field, "write ${NAME} and set the environment variable NAME: secrets are not kept in hook files")
		}
		val, ok := os.LookupEnv(m[1])
		if !ok {
			return hookdtype.Invalid(field, "environment variable %s is not set", m[1])
		}
		if val == "" {
			return hookdtype.Invalid(field, "environment variable %s is empty", m[1])
		}
		*v = val
		return nil
	}
	dc := &h.DispatchConfig
	if err := expand("dispatchConfig.signingSecret", dc.SigningSecret); err != nil {
		return err
	}
	if a := dc.Auth; a != nil {
		if err := expand("dispatchConfig.auth.credential", &a.Credential); err != nil {
			return err
		}
		if err := expand("dispatchConfig.auth.password", &a.Password); err != nil {
			return err
		}
		for k := range a.Headers {
			v := a.Headers[k]
			if err := expand("dispatchConfig.auth.headers."+k, &v); err != nil {
				return err
			}
			a.Headers[k] = v
		}
		if f := a.TokenFetchConfig; f != nil {
			if err := expand("dispatchConfig.auth.tokenFetchConfig.body", &f.Body); err != nil {
				return err
			}
			// The daemon keeps the token URL's query values secret (a client_secret rides there):
			// a URL with a query comes from the environment whole, like any secret.
			if secretRef.MatchString(f.URL) {
				if err := expand("dispatchConfig.auth.tokenFetchConfig.url", &f.URL); err != nil {
					return err
				}
			} else if strings.Contains(f.URL, "?") {
				return hookdtype.Invalid("dispatchConfig.auth.tokenFetchConfig.url",
					"its query is secret to the daemon (shown as ***): write the whole URL as ${NAME} and set the environment variable NAME")
			}
			for k := range f.Headers {
				v := f.Headers[k]
				if err := expand("dispatchConfig.auth.tokenFetchConfig.headers."+k, &v); err != nil {
					return err
				}
				f.Headers[k] = v
			}
		}
	}
	return nil
}
