package volo

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Mode is an ExecutionMode.
type Mode string

// The three modes of the document.
const (
	ModeFast Mode = "FAST" // one model call, no tools: StartRequest.NoTools and MaxIters 1
	ModeMax  Mode = "MAX"  // the tool loop (and whatever thinking the model does), up to agent.maxIters
	ModeAuto Mode = "AUTO" // Classify chooses FAST or MAX
)

// ParseMode reads an executionMode, case-insensitively: FAST, MAX, AUTO ("" is AUTO), and the
// legacy names REACT, THOUGHT and THINKING (MAX) and SIMPLE (FAST).
func ParseMode(s string) (Mode, error) {
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case "", "AUTO":
		return ModeAuto, nil
	case "FAST", "SIMPLE":
		return ModeFast, nil
	case "MAX", "REACT", "THOUGHT", "THINKING":
		return ModeMax, nil
	}
	return "", fmt.Errorf("executionMode: %q is not one of FAST, MAX, AUTO (or REACT, THOUGHT, THINKING, SIMPLE)", s)
}

// greetings are inputs that need no tools, compared after lower-casing and trimming
// punctuation.
var greetings = []string{
	"hi", "hello", "hey", "hiya", "yo", "thanks", "thank you", "thx", "ok", "okay", "bye", "goodbye",
	"good morning", "good afternoon", "good evening", "good night", "how are you", "who are you", "what can you do",
	"你好", "您好", "嗨", "哈喽", "早", "早上好", "下午好", "晚上好", "晚安", "谢谢", "多谢", "感谢", "好的", "再见", "拜拜",
	"你是谁", "你能做什么", "在吗",
}

// toolWords suggest the input needs the tool loop.
var toolWords = []string{
	"file", "write", "read", "save", "list", "shell", "command", "run ", "execute", "http", "url", "fetch", "download",
	"search", "task", "todo", "code", "script", "transfer", "pay", "workspace", "create", "generate", "analy", "plan",
	"文件", "写", "读", "保存", "列出", "执行", "命令", "终端", "网页", "链接", "抓取", "下载", "搜索", "任务", "待办", "代码",
	"脚本", "转账", "付款", "支付", "创建", "生成", "分析", "计划", "调研", "研究",
}

// maxFastRunes is the longest input AUTO may send to FAST.
const maxFastRunes = 40

// Classify is AUTO's classifier. An input goes to FAST when all of these hold: it has no
// attachments, it is at most 40 characters, it names no tool word (file, write, run, http,
// search, task, code, 文件, 执行, 搜索, 任务, 代码, ... see toolWords), and it is greeting-like:
// it starts with a greeting or small talk (hi, hello, thanks, 你好, 谢谢, 你是谁, ... see
// greetings). Everything else goes to MAX, so a task is never starved of its tools.
func Classify(input string, attachments int) Mode {
	s := strings.ToLower(strings.TrimSpace(input))
	if attachments > 0 || s == "" || utf8.RuneCountInString(s) > maxFastRunes {
		return ModeMax
	}
	for _, w := range toolWords {
		if strings.Contains(s, w) {
			return ModeMax
		}
	}
	s = strings.TrimLeft(s, " \t!！?？.。,，~～")
	for _, g := range greetings {
		if rest, ok := strings.CutPrefix(s, g); ok && !startsWithWordChar(rest) {
			return ModeFast
		}
	}
	return ModeMax
}

// startsWithWordChar reports whether s begins with an ASCII letter or digit ("hi" is a greeting,
// "history" is not).
func startsWithWordChar(s string) bool {
	if s == "" {
		return false
	}
	c := s[0]
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
}
