package tools

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// Tool names.
const (
	NameWriteFile   = "workspace_write_file"
	NameReadFile    = "workspace_read_file"
	NameListFiles   = "workspace_list_files"
	NameHTTPRequest = "http_request"
	NameShell       = "shell_execute"
)

const (
	// MaxReadBytes caps the text workspace_read_file returns in one call.
	MaxReadBytes = 256 << 10
	// MaxDataBytes caps a binary file workspace_read_file attaches as data.
	MaxDataBytes = 10 << 20
	// maxListEntries caps a directory listing.
	maxListEntries = 1000
	// sniffBytes is how much of a file decides text or binary.
	sniffBytes = 8 << 10
)

var errNoWorkspace = errors.New("no workspace directory for this session (Env.Workspace is empty)")

// WriteFile is the workspace_write_file tool.
type WriteFile struct{}

// NewWriteFile returns the workspace_write_file tool.
func NewWriteFile() *WriteFile { return &WriteFile{} }

// Spec implements Tool.
func (*WriteFile) Spec() Spec {
	return Spec{
		Name:        NameWriteFile,
		Description: "Write a text file in the workspace (creating missing directories), replacing it or, with append, adding to its end.",
		Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "File path, relative to the workspace or under /workspace/ (e.g. tasks.md, /workspace/notes/a.md)."},
    "content": {"type": "string", "description": "The text to write."},
    "append": {"type": "boolean", "description": "Append to the file instead of replacing it (default false)."}
  },
  "required": ["path", "content"],
  "additionalProperties": false
}`),
		Subject: "path",
	}
}

// Run implements Tool.
func (*WriteFile) Run(ctx context.Context, env Env, args json.RawMessage) (Result, error) {
	var a struct {
		Path    string  `json:"path"`
		Content *string `json:"content"`
		Append  bool    `json:"append"`
	}
	if err := decodeArgs(NameWriteFile, args, &a); err != nil {
		return errorResult("%v", err), nil
	}
	if err := ready(ctx, env); err != nil {
		return Result{}, err
	}
	switch {
	case strings.TrimSpace(a.Path) == "":
		return errorResult("path is required"), nil
	case a.Content == nil:
		return errorResult("content is required (use \"\" for an empty file)"), nil
	case strings.HasSuffix(strings.TrimSpace(a.Path), "/"):
		return errorResult("path %q names a directory; give a file name", a.Path), nil
	}
	wp, root, err := openWorkspace(env, a.Path)
	if err != nil {
		return errorResult("%v", err), nil
	}
	defer root.Close()
	if wp.Rel == "." {
		return errorResult("path %q is the workspace itself; give a file name", a.Path), nil
	}

	created := false
	switch fi, err := root.Stat(wp.inRoot); {
	case errors.Is(err, fs.ErrNotExist):
		created = true
	case err != nil:
		return errorResult("cannot write %s: %v", wp.Rel, unwrapPathError(err)), nil
	case fi.IsDir():
		return errorResult("%s is a directory", wp.Rel), nil
	case !fi.Mode().IsRegular():
		return errorResult("%s is not a regular file", wp.Rel), nil
	}
	if dir := filepath.Dir(wp.inRoot); created && dir != "." {
		if err := root.MkdirAll(dir, 0o700); err != nil {
			return errorResult("cannot create the directory of %s: %v", wp.Rel, unwrapPathError(err)), nil
		}
	}
	flags := os.O_WRONLY | os.O_CREATE
	if a.Append {
		flags |= os.O_APPEND
	} else {
		flags |= os.O_TRUNC
	}
	f, err := root.OpenFile(wp.inRoot, flags, 0o600)
	if err != nil {
		return errorResult("cannot write %s: %v", wp.Rel, unwrapPathError(err)), nil
	}
	n, werr := io.WriteString(f, *a.Content)
	fi, serr := f.Stat()
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return errorResult("writing %s failed after %d bytes: %v", wp.Rel, n, unwrapPathError(werr)), nil
	}
	size := int64(n)
	if serr == nil {
		size = fi.Size()
	}
	text := fmt.Sprintf("wrote %d bytes to %s", n, wp.Rel)
	if a.Append && !created {
		text = fmt.Sprintf("appended %d bytes to %s (now %d bytes)", n, wp.Rel, size)
	}
	return Result{Text: text, Files: []File{{Path: wp.Rel, Size: size, Created: created}}}, nil
}

// ReadFile is the workspace_read_file tool.
type ReadFile struct{}

// NewReadFile returns the workspace_read_file tool.
func NewReadFile() *ReadFile { return &ReadFile{} }

// Spec implements Tool.
func (*ReadFile) Spec() Spec {
	return Spec{
		Name:        NameReadFile,
		Description: "Read a file from the workspace: text is returned (at most 256 KiB per call, by lines with offset/limit), images and other binary files are attached as data.",
		Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "File path, relative to the workspace or under /workspace/."},
    "offset": {"type": "integer", "minimum": 1, "description": "Line to start at, 1 being the first line (default 1)."},
    "limit": {"type": "integer", "minimum": 1, "description": "Maximum number of lines to return (default: to the end, within 256 KiB)."}
  },
  "required": ["path"],
  "additionalProperties": false
}`),
		ReadOnly: true,
		Subject:  "path",
	}
}

// Run implements Tool.
func (*ReadFile) Run(ctx context.Context, env Env, args json.RawMessage) (Result, error) {
	var a struct {
		Path   string `json:"path"`
		Offset int    `json:"offset"`
		Limit  int    `json:"limit"`
	}
	if err := decodeArgs(NameReadFile, args, &a); err != nil {
		return errorResult("%v", err), nil
	}
	if err := ready(ctx, env); err != nil {
		return Result{}, err
	}
	switch {
	case strings.TrimSpace(a.Path) == "":
		return errorResult("path is required"), nil
	case a.Offset < 0:
		return errorResult("offset must be 1 or more (the first line is 1)"), nil
	case a.Limit < 0:
		return errorResult("limit must be 1 or more"), nil
	}
	if a.Offset == 0 {
		a.Offset = 1
	}
	wp, f, fi, failed := openFile(env, a.Path)
	if failed != nil {
		return *failed, nil
	}
	defer f.Close()

	sample := make([]byte, sniffBytes)
	n, err := io.ReadFull(f, sample)
	sample = sample[:n]
	complete := errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
	if err != nil && !complete {
		return errorResult("cannot read %s: %v", wp.Rel, unwrapPathError(err)), nil
	}

	if isImageName(wp.Rel) || !looksLikeText(sample, complete) {
		media := mediaType(wp.Rel, sample)
		size := fi.Size()
		if size > MaxDataBytes {
			return errorResult("%s is a binary file (%s, %s), too large to attach (limit %s)", wp.Rel, media, formatSize(size), formatSize(MaxDataBytes)), nil
		}
		rest, err := io.ReadAll(io.LimitReader(f, MaxDataBytes+1-int64(len(sample))))
		if err != nil {
			return errorResult("cannot read %s: %v", wp.Rel, unwrapPathError(err)), nil
		}
		data := append(sample, rest...)
		if len(data) > MaxDataBytes { // it grew since Stat
			return errorResult("%s is a binary file (%s), too large to attach (limit %s)", wp.Rel, media, formatSize(MaxDataBytes)), nil
		}
		return Result{
			Text: fmt.Sprintf("%s is a binary file (%s, %d bytes), attached as data", wp.Rel, media, len(data)),
			Data: []Data{{Name: path.Base(wp.Rel), MediaType: media, Bytes: data}},
		}, nil
	}
	return readLines(wp.Rel, io.MultiReader(bytes.NewReader(sample), f), a.Offset, a.Limit)
}

// openFile opens the regular workspace file at p for reading; failed is the result to give the
// model when it cannot (missing, a directory, outside the workspace, unreadable).
func openFile(env Env, p string) (wp WorkspacePath, f *os.File, fi fs.FileInfo, failed *Result) {
	fail := func(format string, args ...any) (WorkspacePath, *os.File, fs.FileInfo, *Result) {
		r := errorResult(format, args...)
		return wp, nil, nil, &r
	}
	wp, root, err := openWorkspace(env, p)
	if err != nil {
		return fail("%v", err)
	}
	defer root.Close() // an open file outlives its root
	fi, err = root.Stat(wp.inRoot)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fail("%s does not exist", wp.Rel)
	case err != nil:
		return fail("cannot read %s: %v", wp.Rel, unwrapPathError(err))
	case fi.IsDir():
		return fail("%s is a directory; use %s to see what it holds", wp.Rel, NameListFiles)
	case !fi.Mode().IsRegular():
		return fail("%s is not a regular file", wp.Rel)
	}
	if f, err = root.Open(wp.inRoot); err != nil {
		return fail("cannot read %s: %v", wp.Rel, unwrapPathError(err))
	}
	return wp, f, fi, nil
}

// readLines returns lines [offset, offset+limit) of r (limit 0: to the end), within MaxReadBytes.
func readLines(name string, r io.Reader, offset, limit int) (Result, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var out bytes.Buffer
	line := 1    // the line being read
	total := -1  // lines in the file, once the end is reached
	cutLine := 0 // the line where MaxReadBytes was reached
	cutMid := false
	more := false // lines follow the limit
	for {
		chunk, err := br.ReadSlice('\n')
		if len(chunk) == 0 && errors.Is(err, io.EOF) {
			total = line - 1
			break
		}
		if limit > 0 && line >= offset+limit {
			more = true
			break
		}
		if line >= offset {
			if room := MaxReadBytes - out.Len(); len(chunk) > room {
				part := utf8Prefix(chunk, room)
				out.Write(part)
				cutLine, cutMid = line, len(part) > 0 || !atLineStart(out.Bytes())
				break
			}
			out.Write(chunk)
		}
		switch {
		case err == nil:
			line++
		case errors.Is(err, bufio.ErrBufferFull):
			// The line goes on in the next chunk.
		case errors.Is(err, io.EOF):
			total = line
		default:
			return errorResult("cannot read %s: %v", name, unwrapPathError(err)), nil
		}
		if total >= 0 {
			break
		}
	}
	if total >= 0 && offset > total {
		if total == 0 {
			return Result{Text: fmt.Sprintf("(%s is empty)", name)}, nil
		}
		return errorResult("offset %d is past the end of %s (%d lines)", offset, name, total), nil
	}
	text := out.String()
	switch {
	case cutLine > 0 && cutMid:
		text += fmt.Sprintf("\n[truncated: output is capped at %s per call and line %d was cut; continue with offset=%d]", formatSize(MaxReadBytes), cutLine, cutLine+1)
	case cutLine > 0:
		text += fmt.Sprintf("\n[truncated: output is capped at %s per call; continue with offset=%d]", formatSize(MaxReadBytes), cutLine)
	case more:
		text += fmt.Sprintf("\n[more lines follow; continue with offset=%d]", line)
	}
	return Result{Text: text}, nil
}

// atLineStart reports whether b is empty or ends with a newline.
func atLineStart(b []byte) bool { return len(b) == 0 || b[len(b)-1] == '\n' }

// isImageName reports whether name's extension is a raster image type (SVG is text).
func isImageName(name string) bool {
	t := extMediaType(name)
	return strings.HasPrefix(t, "image/") && t != "image/svg+xml"
}

// extMediaType is the media type of name's extension, without parameters, or "".
func extMediaType(name string) string {
	ext := strings.ToLower(path.Ext(name))
	if ext == "" {
		return ""
	}
	t, _, err := mime.ParseMediaType(mime.TypeByExtension(ext))
	if err != nil {
		return ""
	}
	return t
}

// mediaType is the media type of a binary file: by extension, else sniffed from its start.
func mediaType(name string, sample []byte) string {
	if t := extMediaType(name); t != "" && !strings.HasPrefix(t, "text/") {
		return t
	}
	t, _, err := mime.ParseMediaType(http.DetectContentType(sample))
	if err != nil || strings.HasPrefix(t, "text/") {
		return "application/octet-stream"
	}
	return t
}

// ListFiles is the workspace_list_files tool.
type ListFiles struct{}

// NewListFiles returns the workspace_list_files tool.
func NewListFiles() *ListFiles { return &ListFiles{} }

// Spec implements Tool.
func (*ListFiles) Spec() Spec {
	return Spec{
		Name:        NameListFiles,
		Description: "List a directory of the workspace (the workspace itself by default): names sorted, directories marked with a trailing /, file sizes in bytes.",
		Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "Directory, relative to the workspace or under /workspace/ (default: the workspace)."}
  },
  "required": [],
  "additionalProperties": false
}`),
		ReadOnly: true,
		Subject:  "path",
	}
}

// Run implements Tool.
func (*ListFiles) Run(ctx context.Context, env Env, args json.RawMessage) (Result, error) {
	var a struct {
		Path string `json:"path"`
	}
	if err := decodeArgs(NameListFiles, args, &a); err != nil {
		return errorResult("%v", err), nil
	}
	if err := ready(ctx, env); err != nil {
		return Result{}, err
	}
	wp, root, err := openWorkspace(env, a.Path)
	if err != nil {
		return errorResult("%v", err), nil
	}
	defer root.Close()
	shown := VirtualRoot
	if wp.Rel != "." {
		shown += "/" + wp.Rel
	}

	fi, err := root.Stat(wp.inRoot)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return errorResult("%s does not exist", shown), nil
	case err != nil:
		return errorResult("cannot list %s: %v", shown, unwrapPathError(err)), nil
	case !fi.IsDir():
		return Result{Text: listLine(path.Base(wp.Rel), fi, "")}, nil
	}
	d, err := root.Open(wp.inRoot)
	if err != nil {
		return errorResult("cannot list %s: %v", shown, unwrapPathError(err)), nil
	}
	entries, err := d.ReadDir(-1)
	d.Close()
	if err != nil {
		return errorResult("cannot list %s: %v", shown, unwrapPathError(err)), nil
	}
	if len(entries) == 0 {
		return Result{Text: shown + ": empty directory"}, nil
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })

	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d entries\n", shown, len(entries))
	for i, e := range entries {
		if i == maxListEntries {
			fmt.Fprintf(&b, "[... and %d more entries]\n", len(entries)-i)
			break
		}
		info, err := e.Info()
		if err != nil { // removed since ReadDir
			continue
		}
		target := ""
		if info.Mode()&fs.ModeSymlink != 0 {
			target, _ = root.Readlink(filepath.Join(wp.inRoot, e.Name()))
		}
		b.WriteString(listLine(e.Name(), info, target))
		b.WriteByte('\n')
	}
	return Result{Text: strings.TrimSuffix(b.String(), "\n")}, nil
}

// listLine renders one entry of a listing.
func listLine(name string, fi fs.FileInfo, linkTarget string) string {
	if strings.IndexFunc(name, unicode.IsControl) >= 0 {
		name = strconv.Quote(name)
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		if linkTarget == "" {
			return name + " -> (symbolic link)"
		}
		return name + " -> " + linkTarget
	case fi.IsDir():
		return name + "/"
	case fi.Mode().IsRegular():
		return fmt.Sprintf("%s  %d bytes", name, fi.Size())
	default:
		return fmt.Sprintf("%s  (%s)", name, fi.Mode().Type())
	}
}
