package tools

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// VirtualRoot is where the agent sees its workspace: "/workspace/tasks.md" is "tasks.md" in the
// session's directory.
const VirtualRoot = "/workspace"

// Workspaces hands out one directory per session under a root directory.
type Workspaces struct {
	root string
}

// NewWorkspaces returns workspaces under root; nothing is created until Dir is called.
func NewWorkspaces(root string) *Workspaces {
	return &Workspaces{root: root}
}

// Dir returns the absolute path of the session's workspace, <root>/<sessionID>, creating it
// (and root) with mode 0700 if needed. It refuses a negative session ID and a workspace path
// that exists but is not a directory (a symbolic link included).
func (w *Workspaces) Dir(sessionID int64) (string, error) {
	if w.root == "" {
		return "", errors.New("workspaces: no root directory configured")
	}
	if sessionID < 0 {
		return "", fmt.Errorf("workspaces: invalid session ID %d", sessionID)
	}
	root, err := filepath.Abs(w.root)
	if err != nil {
		return "", fmt.Errorf("workspaces: %w", err)
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return "", fmt.Errorf("workspaces: %w", err)
	}
	dir := filepath.Join(root, strconv.FormatInt(sessionID, 10))
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("workspaces: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", fmt.Errorf("workspaces: %w", err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("workspaces: %s exists and is not a directory", dir)
	}
	return dir, nil
}

// WorkspacePath is a path inside a workspace, as ResolvePath returns it.
type WorkspacePath struct {
	// Rel is the path as the agent named it, cleaned, relative to the workspace and
	// slash-separated; "." is the workspace itself. It is what messages and Result.Files show.
	Rel string
	// Abs is the absolute path with the symbolic links of its existing part resolved: the file
	// that is read or written. It is inside the workspace.
	Abs string

	root   string // the workspace with symbolic links resolved
	inRoot string // Abs relative to root
}

// ResolvePath maps the path p an agent gave to a file in workspace (the session's directory).
// p may be relative to the workspace, under VirtualRoot ("/workspace/notes/a.md"), or an absolute
// path inside the workspace directory itself; it is cleaned. Paths that leave the workspace are
// refused: ".." past the top, absolute paths elsewhere, and symbolic links (anywhere in the
// existing part of the path) that point outside the workspace or nowhere. The error is worded
// for the model.
//
// The tools of this package also do their file operations through an os.Root, so a symbolic
// link swapped in after the check cannot lead outside either.
func ResolvePath(workspace, p string) (WorkspacePath, error) {
	if workspace == "" {
		return WorkspacePath{}, errors.New("no workspace is available for this session")
	}
	wsAbs, err := filepath.Abs(workspace)
	if err != nil {
		return WorkspacePath{}, fmt.Errorf("workspace: %v", err)
	}
	root, err := filepath.EvalSymlinks(wsAbs)
	if err != nil {
		return WorkspacePath{}, fmt.Errorf("workspace is not available: %v", err)
	}
	if strings.IndexByte(p, 0) >= 0 {
		return WorkspacePath{}, fmt.Errorf("path %q contains a NUL byte", p)
	}
	q := strings.TrimSpace(p)
	var rel string
	switch {
	case q == VirtualRoot || strings.HasPrefix(q, VirtualRoot+"/"):
		rel = strings.TrimLeft(strings.TrimPrefix(q, VirtualRoot), "/")
	case filepath.IsAbs(q):
		c := filepath.Clean(q)
		var ok bool
		if rel, ok = within(wsAbs, c); !ok {
			rel, ok = within(root, c)
		}
		if !ok {
			return WorkspacePath{}, fmt.Errorf("path %q is outside the workspace: use a path relative to the workspace, or under %s/", p, VirtualRoot)
		}
	default:
		rel = q
	}
	rel = filepath.Clean(rel) // "" becomes "."
	if rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return WorkspacePath{}, fmt.Errorf("path %q escapes the workspace", p)
	}

	real, err := evalExisting(filepath.Join(root, rel))
	if err != nil {
		if errors.Is(err, errBrokenLink) {
			return WorkspacePath{}, fmt.Errorf("path %q goes through a symbolic link that points nowhere (or outside the workspace)", p)
		}
		return WorkspacePath{}, fmt.Errorf("path %q: %v", p, unwrapPathError(err))
	}
	inRoot, ok := within(root, real)
	if !ok {
		return WorkspacePath{}, fmt.Errorf("path %q leads outside the workspace through a symbolic link", p)
	}
	return WorkspacePath{Rel: filepath.ToSlash(rel), Abs: real, root: root, inRoot: inRoot}, nil
}

var errBrokenLink = errors.New("broken symbolic link")

// evalExisting resolves the symbolic links of the longest existing prefix of path (which is
// absolute and clean) and appends the rest. A path component that exists but does not resolve
// (a dangling link, which a write would follow to wherever it points) is errBrokenLink.
func evalExisting(path string) (string, error) {
	cur, suffix := path, ""
	for {
		r, err := filepath.EvalSymlinks(cur)
		if err == nil {
			return filepath.Join(r, suffix), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		if _, lerr := os.Lstat(cur); lerr == nil {
			return "", errBrokenLink
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return "", err
		}
		suffix = filepath.Join(filepath.Base(cur), suffix)
		cur = parent
	}
}

// within returns target relative to base if target is base or below it.
func within(base, target string) (string, bool) {
	r, err := filepath.Rel(base, target)
	if err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) || filepath.IsAbs(r) {
		return "", false
	}
	return r, true
}

// unwrapPathError drops the *fs.PathError wrapper (which repeats the host path) from err.
func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// openWorkspace resolves p and opens the workspace as an os.Root; the caller closes the root.
func openWorkspace(env Env, p string) (WorkspacePath, *os.Root, error) {
	wp, err := ResolvePath(env.Workspace, p)
	if err != nil {
		return wp, nil, err
	}
	root, err := os.OpenRoot(wp.root)
	if err != nil {
		return wp, nil, fmt.Errorf("workspace is not available: %v", unwrapPathError(err))
	}
	return wp, root, nil
}
