package ui

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/hearthstudio/hearth/app"
	"github.com/hearthstudio/hearth/app/chats"
	"github.com/hearthstudio/hearth/app/server"
	"github.com/hearthstudio/hearth/app/settings"
)

const (
	// streamInterval is the shortest time between two updates of a
	// streaming reply on screen: every token would be up to a few hundred
	// Markdown parses a second on a fast GPU, while 10–15 updates a second
	// already read as fluid.
	streamInterval = 75 * time.Millisecond
	// saveInterval bounds what a crash can lose of a reply being written.
	saveInterval = 2 * time.Second
)

// chatPanel is the Chat tab: the conversations on the left, the chosen one
// on the right, its replies streamed from the engine as they are written.
func chatPanel(st *studio) fyne.CanvasObject {
	cv := newChatView(st)
	st.chat = cv
	// Quitting mid-reply stops the reply at its next token instead of
	// waiting for the engine to finish it, and flushes the history.
	st.onClose(cv.close)
	return cv
}

// chatView is the Chat tab's state and widgets. Everything in it belongs to
// the UI goroutine, except a generation's stream (see generation).
type chatView struct {
	widget.BaseWidget
	st *studio

	store *chats.Store // nil when the folder cannot be made: chats are then not kept
	saver *chats.Writer
	convs []*chats.Conversation // newest change first
	cur   *chats.Conversation
	gen   *generation // the reply being written, nil when none
	model *app.ModelInfo
	// reading is the reply being read aloud and its speech, nil when none.
	reading    *messageRow
	readingRun *speechRun

	list        *widget.List
	title       *widget.Label
	system      *widget.Entry
	transcript  *fyne.Container
	scroll      *container.Scroll
	rows        []*messageRow // one per message of cur
	notice      *fyne.Container
	noModel     *fyne.Container
	picker      *widget.Select // the library's models, to load one from here
	progress    *widget.ProgressBar
	meter       *widget.Label
	input       *promptEntry
	send        *widget.Button // Send, or Stop while a reply is written
	regenerate  *widget.Button
	attachImage *widget.Button // adds an image file to the message
	// attached are the images of the message being written, shown in
	// attachRow under the entry (attachments, hidden when there are none).
	attached    []attachment
	attachRow   *fyne.Container
	attachments *container.Scroll
	// thumbs are the thumbnails made so far, by image name; thumbWaiting
	// the rows waiting for one being made; thumbSem bounds the thumbnails
	// made at once (attach.go).
	thumbs       map[string]image.Image
	thumbWaiting map[string][]func(image.Image, error)
	thumbSem     chan struct{}
	// The current chat's LoRA adapter: its name (a button that chooses
	// another), its scale, and a button that removes it.
	adapterName  *widget.Button
	adapterScale *widget.Slider
	scaleLabel   *widget.Label
	adapterClear *widget.Button
	content      fyne.CanvasObject

	// streamEvery is the shortest time between two updates of a reply
	// (streamInterval); onStream, when set, sees the text of each. Tests
	// shorten the one and set the other, so a reply from a tiny model,
	// written in a fraction of a second, shows its stream for certain.
	streamEvery time.Duration
	onStream    func(text string)
}

func newChatView(st *studio) *chatView {
	cv := &chatView{st: st, streamEvery: streamInterval, thumbs: map[string]image.Image{},
		thumbWaiting: map[string][]func(image.Image, error){}, thumbSem: make(chan struct{}, thumbWorkers)}
	cv.ExtendBaseWidget(cv)
	cv.build()
	cv.openStore()
	st.onStatus(cv.setStatus)
	st.onLibrary(cv.libraryChanged)
	cv.setStatus(st.engine.Status())
	cv.libraryChanged()
	cv.bindKeys()
	return cv
}

func (cv *chatView) CreateRenderer() fyne.WidgetRenderer {
	return widget.NewSimpleRenderer(cv.content)
}

func (cv *chatView) build() {
	cv.list = widget.NewList(
		func() int { return len(cv.convs) },
		func() fyne.CanvasObject {
			title := widget.NewLabel("")
			title.Truncation = fyne.TextTruncateEllipsis
			del := widget.NewButtonWithIcon("", theme.DeleteIcon(), nil)
			del.Importance = widget.LowImportance
			return container.NewBorder(nil, nil, nil, del, title)
		},
		func(id widget.ListItemID, o fyne.CanvasObject) {
			if id >= len(cv.convs) {
				return
			}
			c := cv.convs[id]
			box := o.(*fyne.Container)
			title := displayTitle(c)
			if cv.gen != nil && cv.gen.conv == c {
				title = "● " + title
			}
			box.Objects[0].(*widget.Label).SetText(title)
			box.Objects[1].(*widget.Button).OnTapped = func() { cv.confirmDelete(c) }
		})
	cv.list.OnSelected = func(id widget.ListItemID) {
		if id < len(cv.convs) {
			cv.open(cv.convs[id])
		}
	}
	newChat := widget.NewButtonWithIcon("New chat", theme.ContentAddIcon(), cv.newChat)
	left := container.NewBorder(newChat, nil, nil, nil, cv.list)

	cv.title = widget.NewLabelWithStyle("", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	cv.title.Truncation = fyne.TextTruncateEllipsis
	rename := widget.NewButtonWithIcon("", theme.DocumentCreateIcon(), cv.showRename)
	sampling := widget.NewButtonWithIcon("Sampling", theme.SettingsIcon(), cv.showSampling)
	cv.system = widget.NewMultiLineEntry()
	cv.system.SetMinRowsVisible(2)
	cv.system.Wrapping = fyne.TextWrapWord
	cv.system.SetPlaceHolder("No system prompt")
	cv.system.OnChanged = cv.setSystem
	asDefault := widget.NewButton("Use for new chats", func() {
		cv.st.settings.System = cv.system.Text
		cv.st.saveSettings()
	})
	systemItem := widget.NewAccordionItem("System prompt", container.NewBorder(nil, nil, nil, asDefault, cv.system))
	header := container.NewVBox(
		container.NewBorder(nil, nil, nil, container.NewHBox(rename, sampling), cv.title),
		cv.adapterRow(),
		widget.NewAccordion(systemItem),
	)

	cv.transcript = container.NewVBox()
	cv.scroll = container.NewVScroll(cv.transcript)

	goModels := widget.NewButton("Models tab", cv.goToModels)
	cv.picker = widget.NewSelect(nil, cv.pickModel)
	cv.picker.PlaceHolder = "Load a model"
	noModel := widget.NewLabel("No model is loaded.")
	noModel.Importance = widget.WarningImportance
	cv.noModel = container.NewBorder(nil, nil, nil, container.NewHBox(cv.picker, goModels), noModel)
	cv.notice = container.NewVBox()
	cv.progress = widget.NewProgressBar()
	cv.progress.Hide()
	cv.meter = widget.NewLabel("")
	cv.meter.Truncation = fyne.TextTruncateEllipsis

	cv.input = newPromptEntry()
	cv.input.onSend = cv.sendInput
	cv.input.onEscape = cv.stop
	cv.input.onNewChat = cv.newChat
	cv.send = widget.NewButtonWithIcon("Send", theme.MailSendIcon(), cv.sendOrStop)
	cv.send.Importance = widget.HighImportance
	cv.regenerate = widget.NewButtonWithIcon("Regenerate", theme.ViewRefreshIcon(), cv.regenerateLast)
	cv.attachImage = widget.NewButtonWithIcon("Image…", theme.FileImageIcon(), cv.chooseImage)
	cv.attachRow = container.NewHBox()
	cv.attachments = container.NewHScroll(cv.attachRow)
	cv.attachments.Hide()
	inputRow := container.NewBorder(nil, cv.attachments, nil, container.NewVBox(cv.send, cv.regenerate, cv.attachImage), cv.input)
	bottom := container.NewVBox(cv.noModel, cv.notice, cv.progress, cv.meter, inputRow)

	right := container.NewBorder(header, bottom, nil, nil, cv.scroll)
	split := container.NewHSplit(left, right)
	split.Offset = 0.24
	cv.content = split
}

// bindKeys makes Ctrl+N (Cmd+N on macOS) start a chat and Esc stop a reply
// while the Chat tab is showing. The prompt entry handles both itself when
// it has the focus, since a focused widget receives keys instead of the
// canvas.
func (cv *chatView) bindKeys() {
	c := cv.st.win.Canvas()
	c.AddShortcut(&desktop.CustomShortcut{KeyName: fyne.KeyN, Modifier: fyne.KeyModifierShortcutDefault}, func(fyne.Shortcut) {
		if cv.Visible() {
			cv.newChat()
		}
	})
	// Another panel may have set a key handler: keep it for every other key.
	prev := c.OnTypedKey()
	c.SetOnTypedKey(func(k *fyne.KeyEvent) {
		if k.Name == fyne.KeyEscape && cv.Visible() && cv.gen != nil {
			cv.stop()
			return
		}
		if prev != nil {
			prev(k)
		}
	})
}

func (cv *chatView) openStore() {
	s, err := chats.Open(filepath.Join(cv.st.dir, "chats"))
	if err != nil {
		cv.st.showError(fmt.Errorf("%w: chats will not be kept after Hearth closes", err))
	} else {
		cv.store = s
		cv.saver = s.NewWriter(cv.st.showError)
		convs, bad, err := s.Load()
		if err != nil {
			cv.st.showError(err)
		}
		if len(bad) > 0 {
			cv.st.showError(fmt.Errorf("%d chat file(s) could not be loaded; the other chats are here:\n%w", len(bad), errors.Join(bad...)))
		}
		cv.convs = convs
	}
	if len(cv.convs) == 0 {
		cv.convs = []*chats.Conversation{chats.New(cv.st.settings.System, time.Now())}
	}
	cv.open(cv.convs[0])
}

// close stops the reply being written, keeping what it wrote, and waits
// until every chat is on disk. It must run on the UI goroutine before the
// engine closes: Engine.Close waits for the running job, which would
// otherwise be the whole reply.
func (cv *chatView) close() {
	if g := cv.gen; g != nil {
		g.stopAndWait()
		cv.finish(g)
	}
	if cv.saver != nil {
		cv.saver.Close()
	}
}

// save queues c for writing. A chat with nothing in it yet is not kept:
// New chat pressed twice should not leave empty files behind.
func (cv *chatView) save(c *chats.Conversation) {
	if cv.saver == nil || len(c.Messages) == 0 && !c.Titled || !slices.Contains(cv.convs, c) {
		return
	}
	cv.saver.Save(c)
}

// displayTitle names c in the list and the header; a conversation an API
// client held says through which API.
func displayTitle(c *chats.Conversation) string {
	title := c.Title
	if title == "" {
		title = "New chat"
	}
	if c.API != "" {
		title += " (" + c.API + " API)"
	}
	return title
}

// recordAPI keeps a chat an API client held through the studio's server
// (serve.go): the conversation it continues gains its new messages and
// reply, or a new one holds them, listed with the others and saved, so
// the client's tool calls can be read here. The chat the studio is
// writing a reply in is never the one continued.
func (cv *chatView) recordAPI(x server.Exchange) {
	stop := x.Reply.Stats.Stop
	if stop == "" {
		stop = "stop" // the server records only replies it finished
	}
	reply := chats.Message{Role: chats.Assistant, Content: x.Reply.Text, ToolCalls: chats.ToolCallsOf(x.Reply.ToolCalls),
		Reply: replyOf(x.Reply, stop)}
	var skip *chats.Conversation
	if cv.gen != nil {
		skip = cv.gen.conv
	}
	c, isNew := chats.Record(cv.convs, chats.Exchange{API: x.API, Messages: x.Messages, Reply: reply}, skip, time.Now())
	if isNew {
		cv.convs = append([]*chats.Conversation{c}, cv.convs...)
	}
	cv.save(c)
	if c == cv.cur {
		cv.appendRows() // which lays the transcript out and follows it
		cv.showMeter()
	}
	cv.reorder()
}

// replyOf is what a chat keeps of a finished reply that stopped for stop.
func replyOf(r app.Reply, stop string) chats.Reply {
	return chats.Reply{Model: r.Model, PromptTokens: r.Stats.PromptTokens, Tokens: r.Stats.Generated,
		TokensPerSecond: r.Stats.DecodeRate(), Stop: stop}
}

// newChat opens an empty chat, reusing one that is still empty.
func (cv *chatView) newChat() {
	for _, c := range cv.convs {
		if len(c.Messages) == 0 {
			cv.open(c)
			cv.st.win.Canvas().Focus(cv.input)
			return
		}
	}
	c := chats.New(cv.st.settings.System, time.Now())
	cv.convs = append([]*chats.Conversation{c}, cv.convs...)
	cv.list.Refresh()
	cv.open(c)
	cv.st.win.Canvas().Focus(cv.input)
}

// open shows c.
func (cv *chatView) open(c *chats.Conversation) {
	if c == cv.cur {
		return
	}
	cv.cur = c
	// Selecting calls open again, which returns at once.
	if i := slices.Index(cv.convs, c); i >= 0 {
		cv.list.Select(i)
	}
	cv.title.SetText(displayTitle(c))
	cv.system.OnChanged = nil
	cv.system.SetText(c.System)
	cv.system.OnChanged = cv.setSystem
	cv.showAdapter()
	cv.clearNotice()
	cv.truncateRows(0)
	cv.appendRows()
	cv.scroll.ScrollToBottom()
	cv.showMeter()
	cv.showProgress()
	cv.updateControls()
}

// reorder sorts the list after a change and keeps the current chat
// selected.
func (cv *chatView) reorder() {
	slices.SortStableFunc(cv.convs, func(a, b *chats.Conversation) int { return b.Updated.Compare(a.Updated) })
	cv.list.Refresh()
	if i := slices.Index(cv.convs, cv.cur); i >= 0 {
		cv.list.Select(i)
	}
	cv.title.SetText(displayTitle(cv.cur))
}

func (cv *chatView) confirmDelete(c *chats.Conversation) {
	dialog.ShowConfirm("Delete chat", fmt.Sprintf("Delete %q? This cannot be undone.", displayTitle(c)), func(ok bool) {
		if ok {
			cv.deleteChat(c)
		}
	}, cv.st.win)
}

// deleteChat removes c, stopping its reply if one is being written.
func (cv *chatView) deleteChat(c *chats.Conversation) {
	if cv.gen != nil && cv.gen.conv == c {
		cv.stop()
	}
	i := slices.Index(cv.convs, c)
	if i < 0 {
		return
	}
	cv.convs = slices.Delete(cv.convs, i, i+1)
	if cv.saver != nil {
		cv.saver.Delete(c.ID)
	}
	cv.list.Refresh()
	switch {
	case c != cv.cur:
		// The list's selection is an index: the current chat's moved.
		cv.list.Select(slices.Index(cv.convs, cv.cur))
	case len(cv.convs) == 0:
		cv.cur = nil
		cv.newChat()
	default:
		cv.cur = nil
		cv.open(cv.convs[min(i, len(cv.convs)-1)])
	}
}

func (cv *chatView) showRename() {
	c := cv.cur
	e := widget.NewEntry()
	e.SetText(c.Title)
	e.SetPlaceHolder("The first message's start")
	dialog.ShowForm("Rename chat", "Rename", "Cancel", []*widget.FormItem{widget.NewFormItem("Title", e)}, func(ok bool) {
		if ok {
			cv.rename(c, e.Text)
		}
	}, cv.st.win)
}

func (cv *chatView) rename(c *chats.Conversation, title string) {
	c.Rename(title, time.Now())
	cv.save(c)
	cv.reorder()
}

func (cv *chatView) setSystem(text string) {
	if cv.cur != nil {
		cv.cur.System = text
		cv.save(cv.cur)
	}
}

func (cv *chatView) goToModels() {
	if cv.st.tabs != nil {
		cv.st.tabs.SelectIndex(3)
	}
}

func (cv *chatView) goToTune() {
	if cv.st.tabs != nil && cv.st.tuneTab != nil {
		cv.st.tabs.Select(cv.st.tuneTab)
	}
}

// adapterRow is the current chat's LoRA adapter: "none", or its file with
// a scale from 0 (the base model) through 1 (as trained) to 2.
func (cv *chatView) adapterRow() fyne.CanvasObject {
	label := widget.NewLabel("Adapter:")
	cv.adapterName = widget.NewButtonWithIcon("none", theme.FileIcon(), cv.chooseAdapter)
	cv.adapterName.Importance = widget.LowImportance
	cv.adapterScale = widget.NewSlider(0, 2)
	cv.adapterScale.Step = 0.05
	cv.adapterScale.OnChanged = func(v float64) { cv.scaleLabel.SetText(scaleText(v)) }
	cv.adapterScale.OnChangeEnded = cv.setAdapterScale
	cv.scaleLabel = widget.NewLabel(scaleText(1))
	cv.adapterClear = widget.NewButtonWithIcon("", theme.CancelIcon(), cv.clearAdapter)
	cv.adapterClear.Importance = widget.LowImportance
	return container.NewBorder(nil, nil, container.NewHBox(label, cv.adapterName),
		container.NewHBox(cv.scaleLabel, cv.adapterClear), cv.adapterScale)
}

func scaleText(v float64) string { return fmt.Sprintf("scale %.2f", v) }

// showAdapter shows the current chat's adapter.
func (cv *chatView) showAdapter() {
	a := (*chats.Adapter)(nil)
	if cv.cur != nil {
		a = cv.cur.Adapter
	}
	if a == nil {
		cv.adapterName.SetText("none (choose…)")
		cv.adapterScale.Hide()
		cv.scaleLabel.Hide()
		cv.adapterClear.Hide()
		return
	}
	cv.adapterName.SetText(filepath.Base(a.Path))
	cv.adapterScale.SetValue(float64(a.Scale))
	cv.scaleLabel.SetText(scaleText(float64(a.Scale)))
	cv.adapterScale.Show()
	cv.scaleLabel.Show()
	cv.adapterClear.Show()
}

// chooseAdapter offers the library's adapters, then the two kinds of
// adapter file to browse for: a GGUF LoRA file (what the Tune tab, hearth
// train and llama.cpp write) or a PEFT folder.
func (cv *chatView) chooseAdapter() {
	menu := fyne.NewMenu("", cv.adapterMenuItems()...)
	widget.ShowPopUpMenuAtRelativePosition(menu, cv.st.win.Canvas(), fyne.NewPos(0, cv.adapterName.Size().Height), cv.adapterName)
}

// adapterMenuItems are chooseAdapter's items: the library's usable
// adapters, those that fit the loaded model first, each saying what it is
// for, and the two ways to browse for one.
func (cv *chatView) adapterMenuItems() []*fyne.MenuItem {
	loaded := ""
	if e, ok := cv.st.entryByPath(cv.st.resident()); ok {
		loaded = e.Name
	}
	var fitting, others []*fyne.MenuItem
	for _, e := range cv.st.adapters {
		if e.Err != "" || e.Adapter == nil {
			continue
		}
		label := e.Name + " · for " + e.Adapter.For()
		if len(e.Adapter.Bases) > 0 {
			label = e.Name + " · for " + strings.Join(e.Adapter.Bases, ", ")
		}
		item := fyne.NewMenuItem(label, func() { cv.setAdapter(e.Path, "") })
		if slices.Contains(e.Adapter.Bases, loaded) {
			fitting = append(fitting, item)
		} else {
			others = append(others, item)
		}
	}
	items := append(fitting, others...)
	if len(items) > 0 {
		items = append(items, fyne.NewMenuItemSeparator())
	}
	return append(items,
		fyne.NewMenuItem("Adapter file (.gguf)…", cv.chooseAdapterFile),
		fyne.NewMenuItem("PEFT folder…", cv.chooseAdapterFolder),
	)
}

func (cv *chatView) chooseAdapterFile() {
	cv.st.openFile([]string{".gguf"}, filepath.Join(cv.st.dir, "adapters"), func(path string) { cv.setAdapter(path, "") })
}

func (cv *chatView) chooseAdapterFolder() {
	d := dialog.NewFolderOpen(func(u fyne.ListableURI, err error) {
		if err != nil {
			cv.st.showError(err)
			return
		}
		if u == nil {
			return
		}
		// A PEFT folder holds adapter_config.json beside the weights; any
		// other folder is refused here rather than at the next reply.
		path := u.Path()
		if _, err := os.Stat(filepath.Join(path, "adapter_config.json")); err != nil {
			cv.st.showError(fmt.Errorf("%s is not a PEFT adapter folder: it has no adapter_config.json", path))
			return
		}
		cv.setAdapter(path, "")
	}, cv.st.win)
	d.Resize(fyne.NewSize(800, 560))
	d.Show()
}

// setAdapter applies the adapter at path to the current chat's replies
// from the next one on, at the scale it had (1 for the first).
func (cv *chatView) setAdapter(path, model string) {
	c := cv.cur
	if c == nil {
		return
	}
	scale := float32(1)
	if c.Adapter != nil {
		scale = c.Adapter.Scale
	}
	c.Adapter = &chats.Adapter{Path: path, Scale: scale, Model: model}
	cv.save(c)
	cv.showAdapter()
}

func (cv *chatView) setAdapterScale(v float64) {
	if c := cv.cur; c != nil && c.Adapter != nil {
		// A copy: the writer's goroutine may hold the old one.
		a := *c.Adapter
		a.Scale = float32(v)
		c.Adapter = &a
		cv.save(c)
	}
}

func (cv *chatView) clearAdapter() {
	if c := cv.cur; c != nil && c.Adapter != nil {
		c.Adapter = nil
		cv.save(c)
		cv.showAdapter()
	}
}

// useAdapter opens a new chat that answers with the adapter at path on
// its base model, loading that model unless it is the resident one.
func (cv *chatView) useAdapter(model, path string) {
	cv.newChat()
	cv.cur.Adapter = &chats.Adapter{Path: path, Scale: 1, Model: model}
	cv.showAdapter()
	if e, ok := cv.st.entryByName(model); ok && cv.st.resident() != e.Path {
		cv.st.loadModel(e)
	}
	if cv.st.tabs != nil {
		cv.st.tabs.SelectIndex(0)
	}
	cv.st.win.Canvas().Focus(cv.input)
}

// libraryChanged offers the library's usable models in the picker and
// shows a load under way.
func (cv *chatView) libraryChanged() {
	var names []string
	for _, e := range cv.st.entries {
		if e.Err == "" {
			names = append(names, e.Name)
		}
	}
	cv.picker.SetOptions(names)
	if cv.st.loading == "" && cv.picker.Selected != "" {
		cv.picker.ClearSelected()
	}
	cv.showProgress()
}

// pickModel loads the model chosen in the picker; the studio shows a
// failure, and the progress shows here and in the Models tab.
func (cv *chatView) pickModel(name string) {
	if name == "" || cv.st.loading != "" {
		return
	}
	if e, ok := cv.st.entryByName(name); ok {
		cv.st.loadModel(e)
	}
}

func (cv *chatView) setStatus(s app.Status) {
	cv.model = s.Model
	if s.Model == nil && !s.Busy {
		cv.noModel.Show()
	} else {
		cv.noModel.Hide()
	}
	cv.showMeter()
}

// updateControls enables what can be done now. One reply is written at a
// time: the engine has one model and one cache, and a second request would
// only wait behind the first.
func (cv *chatView) updateControls() {
	busy := cv.gen != nil
	if busy {
		cv.send.SetText("Stop")
		cv.send.SetIcon(theme.MediaStopIcon())
		cv.send.Importance = widget.DangerImportance
		if cv.gen.stopping {
			cv.send.Disable()
		} else {
			cv.send.Enable()
		}
	} else {
		cv.send.SetText("Send")
		cv.send.SetIcon(theme.MailSendIcon())
		cv.send.Importance = widget.HighImportance
		cv.send.Enable()
	}
	cv.send.Refresh()
	setEnabled(!busy && canRegenerate(cv.cur), cv.regenerate)
	for _, r := range cv.rows {
		r.setBusy(busy)
	}
	cv.list.Refresh()
}

func (cv *chatView) sendOrStop() {
	if cv.gen != nil {
		cv.stop()
		return
	}
	cv.sendInput()
}

// sendInput sends what the prompt entry holds, with the images attached
// to it. While a reply is written the text and the images stay, to be
// sent after.
func (cv *chatView) sendInput() {
	text := strings.TrimRight(cv.input.Text, " \t\r\n")
	if strings.TrimSpace(text) == "" && len(cv.attached) == 0 || cv.gen != nil {
		return
	}
	d := &draft{text: cv.input.Text, attached: cv.attached}
	var images []chats.Image
	for _, a := range cv.attached {
		images = append(images, a.image)
	}
	cv.input.SetText("")
	cv.attached = nil
	cv.showAttachments()
	cv.cur.Add(chats.Message{Role: chats.User, Content: text, Images: images}, time.Now())
	cv.startReply()
	if cv.gen != nil {
		cv.gen.draft = d
	}
}

// givenBack is the error of a message that giveBack gave back.
type givenBack struct{ error }

func (e givenBack) Unwrap() error { return e.error }

// giveBack undoes the sending of g's message, which the engine refused
// before a word of reply: the message leaves the chat and its text and
// images go back to the composer, before what was written there since.
func (cv *chatView) giveBack(g *generation) {
	c, i, d := g.conv, g.index-1, g.draft
	c.Cut(i, time.Now())
	cv.truncateRows(i)
	cv.relayout(true)
	text := d.text
	if cv.input.Text != "" {
		text += "\n" + cv.input.Text
	}
	cv.input.SetText(text)
	attached := cv.attached
	cv.attached = nil
	for _, a := range append(d.attached, attached...) {
		cv.attach(a)
	}
	cv.showAttachments()
	if len(c.Messages) == 0 && !c.Titled && cv.saver != nil {
		// save keeps no empty chat: the file written when the message was
		// sent goes.
		cv.saver.Delete(c.ID)
	}
}

// regenerateLast writes the last reply again, or answers a last user
// message left without one (no model was loaded, say).
func (cv *chatView) regenerateLast() {
	c := cv.cur
	if cv.gen != nil || !canRegenerate(c) {
		return
	}
	if n := len(c.Messages); c.Messages[n-1].Role == chats.Assistant {
		c.Cut(n-1, time.Now())
	}
	cv.startReply()
}

// canRegenerate says whether c ends in a user message, or in a reply to
// one: what the studio can write a reply to. An API client's chat may
// end in a reply to a tool's result, which the studio cannot run again.
func canRegenerate(c *chats.Conversation) bool {
	if c == nil {
		return false
	}
	n := len(c.Messages)
	switch {
	case n > 0 && c.Messages[n-1].Role == chats.User:
		return true
	case n > 1 && c.Messages[n-1].Role == chats.Assistant:
		return c.Messages[n-2].Role == chats.User
	}
	return false
}

// resend replaces message i with text and cuts the conversation there.
func (cv *chatView) resend(i int, text string) {
	c := cv.cur
	if cv.gen != nil || i >= len(c.Messages) || strings.TrimSpace(text) == "" && len(c.Messages[i].Images) == 0 {
		return
	}
	// The edit is of the text; the message keeps its images.
	images := c.Messages[i].Images
	c.Cut(i, time.Now())
	c.Add(chats.Message{Role: chats.User, Content: text, Images: images}, time.Now())
	cv.truncateRows(i)
	cv.startReply()
}

func (cv *chatView) stop() {
	if g := cv.gen; g != nil && g.stop() {
		cv.updateControls()
	}
}

// startReply asks the engine to answer the current chat, whose last
// message is the user's, on a goroutine of its own: Chat blocks until the
// reply is done.
func (cv *chatView) startReply() {
	c := cv.cur
	cv.clearNotice()
	if cv.gen != nil || len(c.Messages) == 0 || c.Messages[len(c.Messages)-1].Role != chats.User {
		return
	}
	s := cv.st.settings.Sampling
	req := app.ChatRequest{Messages: c.Chat()}
	req.Sampling = s.Options(rand.Uint64())
	req.MaxTokens = s.MaxTokens
	if a := c.Adapter; a != nil {
		req.Adapters = []app.AdapterSpec{{Path: a.Path, Scale: a.Scale}}
	}
	base := contextUsed(c)
	c.Add(chats.Message{Role: chats.Assistant}, time.Now())
	job, ctx := newStoppable()
	g := &generation{stoppable: job, conv: c, index: len(c.Messages) - 1, lastSave: time.Now(), base: base, every: cv.streamEvery}
	flush := func() { cv.st.post(func() { cv.stream(g) }) }
	req.Progress = func(p app.Progress) { g.setProgress(p, flush) }
	cv.gen = g
	cv.save(c)
	cv.reorder()
	cv.truncateRows(g.index)
	cv.appendRows()
	cv.scroll.ScrollToBottom()
	cv.showMeter()
	cv.updateControls()

	// The studio replaces its engine when the backend changes; this reply
	// stays with the engine it started on.
	eng, store := cv.st.engine, cv.store
	go func() {
		defer g.cancel()
		var reply app.Reply
		var err error
		if store != nil {
			// The images of messages loaded from disk are read here, off
			// the UI goroutine.
			req.Messages, err = store.ReadImages(req.Messages)
		}
		if err == nil {
			reply, err = eng.Chat(ctx, req, func(t app.Token) error {
				g.add(t, flush)
				return nil
			})
		}
		g.reply, g.err = reply, err
		close(g.done)
		cv.st.post(func() { cv.finish(g) })
	}()
}

// stream shows what g has written since the last update.
func (cv *chatView) stream(g *generation) {
	start := time.Now()
	g.mu.Lock()
	g.scheduled = false
	text := g.text.String()
	g.mu.Unlock()
	if cv.gen != g {
		return
	}
	g.conv.Messages[g.index].Content = text
	g.shown++
	if cv.cur == g.conv && g.index < len(cv.rows) {
		follow := cv.atBottom()
		cv.rows[g.index].setText(text)
		cv.relayout(follow)
	}
	if cv.onStream != nil {
		cv.onStream(text)
	}
	cv.showProgress()
	cv.showMeter()
	if time.Since(g.lastSave) >= saveInterval {
		cv.save(g.conv)
		g.lastSave = time.Now()
	}
	g.mu.Lock()
	g.cost = time.Since(start)
	g.mu.Unlock()
}

// finish records the end of g's reply: its text and statistics, or why
// it failed.
func (cv *chatView) finish(g *generation) {
	if cv.gen != g {
		return
	}
	cv.gen = nil
	c, reply, err := g.conv, g.reply, g.err
	msg := &c.Messages[g.index]
	msg.Content = reply.Text
	stop := reply.Stats.Stop
	if err != nil {
		stop = "error"
	}
	// A reply stopped or failed before its first word is not kept; one that
	// the model ended at once is (an empty answer is still an answer).
	kept := msg.Content != "" || err == nil && stop != "canceled"
	if kept {
		msg.Reply = replyOf(reply, stop)
		if err != nil {
			msg.Reply.Error = err.Error()
		}
		c.Updated = time.Now()
	} else {
		c.Cut(g.index, time.Now())
	}
	if !kept && errors.Is(err, app.ErrNoProjector) && g.draft != nil && cv.cur == c {
		cv.giveBack(g)
		err = givenBack{err}
	}
	cv.save(c)
	if cv.cur == c {
		if kept && g.index < len(cv.rows) {
			follow := cv.atBottom()
			cv.rows[g.index].finish(*msg)
			cv.relayout(follow)
		} else {
			cv.truncateRows(g.index)
			cv.relayout(true)
		}
	}
	if slices.Contains(cv.convs, c) {
		cv.reorder()
	}
	cv.showProgress()
	cv.showMeter()
	cv.updateControls()
	if err != nil {
		cv.showFailure(c, err)
	} else if kept && stop == "length" && cv.model != nil && reply.Stats.PromptTokens+reply.Stats.Generated >= cv.model.Context {
		cv.showFailure(c, fmt.Errorf("%w (%d tokens)", app.ErrContextFull, cv.model.Context))
	}
}

// showFailure explains err under the transcript when c is showing, or in a
// dialog otherwise.
func (cv *chatView) showFailure(c *chats.Conversation, err error) {
	var text string
	var action *widget.Button
	switch {
	case errors.Is(err, app.ErrNoModel):
		text = "No model is loaded. Load one in the Models tab, then press Regenerate."
		action = widget.NewButton("Go to Models", cv.goToModels)
	case errors.Is(err, app.ErrContextFull):
		text = fmt.Sprintf("The chat has filled the model's context: %v. Start a new chat, or edit an earlier message to shorten this one.", err)
		action = widget.NewButton("New chat", cv.newChat)
	case errors.Is(err, app.ErrNoProjector):
		text = fmt.Sprintf("The model cannot read images: %v. Load a model that sees them (Gemma 3 with its mmproj file beside it), or chat without images.", err)
		if errors.As(err, new(givenBack)) {
			text += " Your message is back in the message box."
		}
	case errors.Is(err, app.ErrBusy):
		text = "The engine is busy with other requests; press Regenerate to try again."
	case errors.Is(err, app.ErrTraining):
		name := cv.st.engine.Status().Training
		if name == "" {
			name = "a model"
		}
		text = fmt.Sprintf("The GPU is fine-tuning %s in the Tune tab, so it cannot answer now. Chat works again when the run ends or is stopped; then press Regenerate.", name)
		action = widget.NewButton("Go to Tune", cv.goToTune)
	default:
		text = "The reply failed: " + err.Error()
	}
	if cv.cur != c {
		cv.st.showError(errors.New(text))
		return
	}
	label := widget.NewLabel(text)
	label.Wrapping = fyne.TextWrapWord
	label.Importance = widget.DangerImportance
	var row fyne.CanvasObject = label
	if action != nil {
		row = container.NewBorder(nil, nil, nil, action, label)
	}
	cv.notice.Objects = []fyne.CanvasObject{row}
	cv.notice.Refresh()
}

func (cv *chatView) clearNotice() {
	if len(cv.notice.Objects) > 0 {
		cv.notice.Objects = nil
		cv.notice.Refresh()
	}
}

// showProgress shows the evaluation of the prompt of the reply being
// written in the chat on screen, or else a model being loaded.
func (cv *chatView) showProgress() {
	g := cv.gen
	var p app.Progress
	if g != nil && g.conv == cv.cur {
		g.mu.Lock()
		p = g.progress
		g.mu.Unlock()
	}
	name := ""
	if p.Stage == "" && cv.st.loading != "" {
		name = cv.st.loading
		p = app.Progress{Stage: "load", Done: cv.st.loadDone, Total: cv.st.loadTotal}
	}
	if p.Stage == "" || p.Total <= 0 || p.Done >= p.Total {
		cv.progress.Hide()
		return
	}
	cv.progress.Max = float64(p.Total)
	cv.progress.Value = float64(p.Done)
	cv.progress.TextFormatter = func() string {
		if p.Stage == "load" {
			return fmt.Sprintf("Loading %s: %s of %s", name, settings.FormatSize(p.Done), settings.FormatSize(p.Total))
		}
		return fmt.Sprintf("Reading the prompt: %d of %d tokens", p.Done, p.Total)
	}
	cv.progress.Show()
	cv.progress.Refresh()
}

// showMeter shows the speed and the context use of the reply being
// written, or of the current chat's last reply.
func (cv *chatView) showMeter() {
	ctxSize := 0
	if cv.model != nil {
		ctxSize = cv.model.Context
	}
	var parts []string
	if g := cv.gen; g != nil && g.conv == cv.cur {
		g.mu.Lock()
		tokens, rate := g.tokens, rateOf(g.tokens-1, g.decode)
		g.mu.Unlock()
		parts = append(parts, fmt.Sprintf("%d tokens", tokens))
		if rate > 0 {
			parts = append(parts, fmt.Sprintf("%.1f tokens/s", rate))
		}
		// The new user message's tokens are known only when the reply
		// ends, so while it streams the count is a lower bound.
		parts = append(parts, contextText(g.base+tokens, ctxSize, true))
	} else if cv.cur != nil {
		if r := lastReply(cv.cur); r != nil && r.Stop != "" {
			if r.TokensPerSecond > 0 {
				parts = append(parts, fmt.Sprintf("last reply %.1f tokens/s", r.TokensPerSecond))
			}
			parts = append(parts, contextText(r.PromptTokens+r.Tokens, ctxSize, false))
		} else if ctxSize > 0 {
			parts = append(parts, fmt.Sprintf("context %d tokens", ctxSize))
		}
		if g := cv.gen; g != nil {
			parts = append(parts, fmt.Sprintf("a reply is being written in %q", displayTitle(g.conv)))
		}
	}
	cv.meter.SetText(strings.Join(parts, " · "))
}

func contextText(used, size int, atLeast bool) string {
	prefix := "context "
	if atLeast {
		prefix = "context ≥ "
	}
	if size <= 0 {
		return fmt.Sprintf("%s%d tokens", prefix, used)
	}
	return fmt.Sprintf("%s%d / %d (%.0f%%)", prefix, used, size, 100*float64(used)/float64(size))
}

func rateOf(n int, d time.Duration) float64 {
	if n <= 0 || d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

func lastReply(c *chats.Conversation) *chats.Reply {
	for i := len(c.Messages) - 1; i >= 0; i-- {
		if c.Messages[i].Role == chats.Assistant {
			return &c.Messages[i].Reply
		}
	}
	return nil
}

// contextUsed is the context the chat's last finished turn filled.
func contextUsed(c *chats.Conversation) int {
	if r := lastReply(c); r != nil {
		return r.PromptTokens + r.Tokens
	}
	return 0
}

// truncateRows removes the rows from message n on.
func (cv *chatView) truncateRows(n int) {
	if n >= len(cv.rows) {
		return
	}
	for _, r := range cv.rows[n:] {
		cv.transcript.Remove(r.box)
	}
	cv.rows = cv.rows[:n]
}

// appendRows adds rows for the current chat's messages that have none.
// Rows are added one by one with Container.Add, which lays out the
// transcript without redrawing the rows already there.
func (cv *chatView) appendRows() {
	c := cv.cur
	for i := len(cv.rows); i < len(c.Messages); i++ {
		live := cv.gen != nil && cv.gen.conv == c && cv.gen.index == i
		r := newMessageRow(cv, i, c.Messages[i], live)
		cv.rows = append(cv.rows, r)
		cv.transcript.Add(r.box)
	}
	cv.relayout(true)
}

// atBottom reports whether the transcript is scrolled to its end, where a
// growing reply should keep it.
func (cv *chatView) atBottom() bool {
	return cv.scroll.Offset.Y+cv.scroll.Size().Height >= cv.transcript.Size().Height-2*theme.Padding()
}

// relayout fits the transcript to its rows after one of them grew. A
// refresh of the scroll would refresh every row, parsing and wrapping the
// whole chat again; resizing the content only lays out the rows whose size
// changed.
func (cv *chatView) relayout(follow bool) {
	cv.transcript.Resize(cv.transcript.MinSize().Max(cv.scroll.Size()))
	if follow {
		cv.scroll.ScrollToBottom()
	}
}

// generation is a reply being written. The engine's goroutine adds tokens
// under mu and schedules an update; the UI goroutine takes the text at
// most every streamInterval (longer when an update itself took long), so
// the cost of showing a reply does not grow with the token rate.
type generation struct {
	stoppable // done is closed when Chat has returned
	conv      *chats.Conversation
	index     int           // of the reply in conv.Messages
	every     time.Duration // the chat view's streamEvery
	// draft is the message as the composer sent it; nil for a reply
	// regenerated or to an edited message.
	draft *draft

	// Set before done is closed.
	reply app.Reply
	err   error

	// The UI goroutine's.
	lastSave time.Time
	base     int // the context the turns before this one filled
	shown    int // the updates shown so far

	mu        sync.Mutex
	text      strings.Builder
	tokens    int
	decode    time.Duration // from the first token to the last
	progress  app.Progress
	scheduled bool
	cost      time.Duration // how long the last update took on the UI goroutine
}

func (g *generation) add(t app.Token, flush func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.text.WriteString(t.Text)
	// ID -1 carries text the decoder held back until the end, not a token.
	if t.ID >= 0 {
		if g.tokens > 0 {
			g.decode += t.Elapsed
		}
		g.tokens++
	}
	g.progress = app.Progress{}
	g.schedule(flush)
}

func (g *generation) setProgress(p app.Progress, flush func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.progress = p
	g.schedule(flush)
}

// schedule arranges one update, unless one is pending. The next update
// waits at least three times as long as the last took, so showing a reply
// never takes more than a quarter of the UI goroutine.
func (g *generation) schedule(flush func()) {
	if g.scheduled {
		return
	}
	g.scheduled = true
	time.AfterFunc(max(g.every, 3*g.cost), flush)
}

// messageRow is one message in the transcript: a header with the role,
// statistics and buttons, and the text.
type messageRow struct {
	box   *fyne.Container
	meta  *hintLabel
	body  *fyne.Container
	md    *markdownView // an assistant's reply, as Markdown
	plain *widget.Label // a user's message, as typed
	// content is what a user's message shows when it is not being
	// edited: its images' thumbnails, if any, above plain.
	content    fyne.CanvasObject
	copy, edit *widget.Button
	// speak reads a reply aloud, and stops it; disabled while the reply
	// is written.
	speak *widget.Button
	live  bool
	msg   chats.Message
	// editor and resend are the editor of a user message, while it shows.
	editor *widget.Entry
	resend *widget.Button
}

func newMessageRow(cv *chatView, i int, m chats.Message, live bool) *messageRow {
	r := &messageRow{msg: m, meta: newHintLabel(""), body: container.NewStack(), live: live}
	r.meta.Truncation = fyne.TextTruncateEllipsis
	r.copy = widget.NewButtonWithIcon("", theme.ContentCopyIcon(), func() {
		cv.st.app.Clipboard().SetContent(r.msg.Content)
	})
	r.copy.Importance = widget.LowImportance
	buttons := container.NewHBox(r.copy)
	role := "You"
	switch m.Role {
	case chats.User, chats.Instruction:
		// As typed: the user's message, or a system message inside an API
		// client's chat, which the studio does not edit.
		r.plain = widget.NewLabel(displayPlain(m.Content))
		r.plain.Wrapping = fyne.TextWrapWord
		r.plain.Selectable = true
		r.content = r.plain
		if len(m.Images) > 0 {
			r.content = container.NewVBox(cv.imageStrip(m.Images), r.plain)
		}
		r.body.Objects = []fyne.CanvasObject{r.content}
		if m.Role == chats.Instruction {
			role = "System"
			break
		}
		r.edit = widget.NewButtonWithIcon("", theme.DocumentCreateIcon(), func() { r.startEdit(cv, i) })
		r.edit.Importance = widget.LowImportance
		buttons.Add(r.edit)
	case chats.Tool:
		// A tool's result, folded: an agent's can be pages long.
		role = "Tool"
		r.body.Objects = []fyne.CanvasObject{widget.NewAccordion(
			widget.NewAccordionItem("Result of "+toolName(cv.cur, i), monospace(m.Content)))}
	default:
		role = "Assistant"
		r.md = newMarkdownView()
		r.md.Set(m.Content)
		r.body.Objects = []fyne.CanvasObject{r.md.box}
		if len(m.ToolCalls) > 0 {
			// The calls, each folded to its function's name.
			calls := widget.NewAccordion()
			for _, tc := range m.ToolCalls {
				calls.Append(widget.NewAccordionItem("Called "+tc.Name, monospace(indentJSON(tc.Arguments))))
			}
			r.body.Objects = []fyne.CanvasObject{container.NewVBox(r.md.box, calls)}
		}
		r.speak = widget.NewButtonWithIcon("", theme.VolumeUpIcon(), func() { cv.readAloud(r) })
		r.speak.Importance = widget.LowImportance
		if live {
			r.speak.Disable()
		}
		buttons.Add(r.speak)
	}
	r.meta.SetText(replyMeta(m, live))
	roleLabel := widget.NewLabelWithStyle(role, fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	header := container.NewBorder(nil, nil, roleLabel, buttons, r.meta)
	r.box = container.NewVBox(header, r.body)
	r.setBusy(cv.gen != nil)
	return r
}

// toolName is the function whose result message i of c is: its own name,
// or the name of the call it answers (OpenAI's results name only the
// call's ID).
func toolName(c *chats.Conversation, i int) string {
	m := c.Messages[i]
	if m.Name != "" {
		return m.Name
	}
	for j := i - 1; j >= 0; j-- {
		for _, tc := range c.Messages[j].ToolCalls {
			if tc.ID != "" && tc.ID == m.ToolCallID {
				return tc.Name
			}
		}
	}
	return "a tool"
}

// monospace is text shown as it is, in a selectable monospaced label.
func monospace(text string) *widget.Label {
	l := widget.NewLabelWithStyle(text, fyne.TextAlignLeading, fyne.TextStyle{Monospace: true})
	l.Wrapping = fyne.TextWrapBreak
	l.Selectable = true
	return l
}

// indentJSON is a call's arguments laid out for reading; text that is not
// JSON is shown as it is.
func indentJSON(text string) string {
	var b bytes.Buffer
	if json.Indent(&b, []byte(text), "", "  ") != nil {
		return text
	}
	return b.String()
}

func (r *messageRow) setText(text string) {
	r.msg.Content = text
	r.md.Set(text)
}

func (r *messageRow) finish(m chats.Message) {
	r.msg = m
	r.live = false
	r.md.Set(m.Content)
	r.meta.SetText(replyMeta(m, false))
	if r.speak != nil {
		r.speak.Enable()
	}
}

// showReading shows the read-aloud button as Stop while the reply is read.
func (r *messageRow) showReading(on bool) {
	if on {
		r.speak.SetIcon(theme.MediaStopIcon())
	} else {
		r.speak.SetIcon(theme.VolumeUpIcon())
	}
}

// readAloud reads r's reply aloud with the voice last chosen in the Voice
// tab, or stops it if it is being read. A reply still being written is
// not read: its end is not known yet.
func (cv *chatView) readAloud(r *messageRow) {
	vv := cv.st.voice
	if vv == nil || r.md == nil {
		return
	}
	if cv.reading == r {
		vv.stopSpeech(cv.readingRun)
		return
	}
	if r.live {
		return
	}
	var run *speechRun
	run, err := vv.readAloud(speakableText(r.msg.Content), func(err error) {
		// Runs on the UI goroutine after readAloud has returned.
		if cv.readingRun != run {
			return
		}
		cv.reading, cv.readingRun = nil, nil
		r.showReading(false)
		if err != nil && !errors.Is(err, context.Canceled) {
			cv.st.showError(readAloudFailure(err))
		}
	})
	if err != nil {
		cv.st.showError(err)
		return
	}
	if cv.reading != nil {
		cv.reading.showReading(false) // stopped by the new speech
	}
	cv.reading, cv.readingRun = r, run
	r.showReading(true)
}

// readAloudFailure explains why a reply could not be read aloud.
func readAloudFailure(err error) error {
	switch {
	case errors.Is(err, app.ErrNoVoiceModel):
		return errors.New(readAloudNoModelText(err))
	case errors.Is(err, app.ErrNoAudioDevice):
		return fmt.Errorf("the reply cannot be read aloud: there is no audio output device (%w)", err)
	}
	return fmt.Errorf("reading the reply aloud failed: %w", err)
}

// speakableText is what a reply says, without its Markdown: the text the
// chat shows, as Fyne's Markdown parser gives it (the renderer's own
// reading, so "**bold**" and "[a link](url)" are read as the chat shows
// them), each block on a line of its own, which the voice reads as a
// pause. Code blocks are left out: read aloud, code is noise.
func speakableText(markdown string) string {
	var b strings.Builder
	var walk func(segs []widget.RichTextSegment)
	walk = func(segs []widget.RichTextSegment) {
		for _, s := range segs {
			switch v := s.(type) {
			case *widget.TextSegment:
				if v.Style.TextStyle.Monospace && !v.Style.Inline {
					b.WriteString("\n")
					continue
				}
				b.WriteString(v.Text)
				if !v.Style.Inline {
					b.WriteString("\n")
				}
			case *widget.HyperlinkSegment:
				b.WriteString(v.Text)
			case *widget.ListSegment:
				walk(v.Items)
			case *widget.ParagraphSegment:
				walk(v.Texts)
				b.WriteString("\n")
			}
		}
	}
	walk(widget.NewRichTextFromMarkdown(markdown).Segments)
	var lines []string
	for l := range strings.Lines(b.String()) {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}

func (r *messageRow) setBusy(busy bool) {
	for _, b := range []*widget.Button{r.edit, r.resend} {
		switch {
		case b == nil:
		case busy:
			b.Disable()
		default:
			b.Enable()
		}
	}
}

// startEdit turns a user message into an editor; Resend cuts the chat
// there and sends the edited text.
func (r *messageRow) startEdit(cv *chatView, i int) {
	e := widget.NewMultiLineEntry()
	e.Wrapping = fyne.TextWrapWord
	e.SetText(r.msg.Content)
	cancel := widget.NewButton("Cancel", func() {
		r.editor, r.resend = nil, nil
		r.body.Objects = []fyne.CanvasObject{r.content}
		r.body.Refresh()
		cv.relayout(false)
	})
	resend := widget.NewButtonWithIcon("Resend", theme.MailSendIcon(), func() { cv.resend(i, e.Text) })
	resend.Importance = widget.HighImportance
	r.editor, r.resend = e, resend
	hint := "Resending removes the messages after this one."
	if len(r.msg.Images) > 0 {
		hint = "Resending keeps the images and removes the messages after this one."
	}
	note := newHintLabel(hint)
	r.body.Objects = []fyne.CanvasObject{container.NewVBox(e, container.NewBorder(nil, nil, nil, container.NewHBox(cancel, resend), note))}
	r.body.Refresh()
	cv.relayout(false)
	cv.st.win.Canvas().Focus(e)
}

// replyMeta is the header line of a message: for a reply, the model and
// how it was written.
func replyMeta(m chats.Message, live bool) string {
	if m.Role != chats.Assistant {
		return ""
	}
	if live {
		return "writing…"
	}
	r := m.Reply
	var parts []string
	if r.Model != "" {
		parts = append(parts, r.Model)
	}
	if r.Tokens > 0 {
		parts = append(parts, fmt.Sprintf("%d tokens", r.Tokens))
	}
	if r.TokensPerSecond > 0 {
		parts = append(parts, fmt.Sprintf("%.1f tokens/s", r.TokensPerSecond))
	}
	switch r.Stop {
	case "":
		parts = append(parts, "interrupted: Hearth closed while it was written")
	case "canceled":
		parts = append(parts, "stopped")
	case "length":
		parts = append(parts, "cut at the length limit")
	case "error":
		parts = append(parts, "failed: "+r.Error)
	}
	switch {
	case len(m.ToolCalls) == 1:
		parts = append(parts, "1 tool call")
	case len(m.ToolCalls) > 1:
		parts = append(parts, fmt.Sprintf("%d tool calls", len(m.ToolCalls)))
	case m.Content == "":
		parts = append(parts, "empty reply")
	}
	return strings.Join(parts, " · ")
}

// displayPlain breaks a user message's long lines for display, as
// displayMarkdown does a reply's; copying takes the message as typed.
func displayPlain(text string) string {
	if !hasLongLine(text) {
		return text
	}
	var b strings.Builder
	for l := range strings.Lines(text) {
		b.WriteString(breakLine(l, true))
	}
	return b.String()
}

// promptEntry is the message box: Enter sends and Shift+Enter starts a new
// line (the opposite of Fyne's multi-line Entry), Esc stops the reply and
// Ctrl+N starts a chat, since a focused widget gets keys before the canvas.
type promptEntry struct {
	widget.Entry
	onSend, onEscape, onNewChat func()
	shift                       bool
}

func newPromptEntry() *promptEntry {
	e := &promptEntry{}
	e.MultiLine = true
	e.Wrapping = fyne.TextWrapWord
	e.SetPlaceHolder("Message (Enter sends, Shift+Enter starts a new line)")
	e.ExtendBaseWidget(e)
	e.SetMinRowsVisible(3)
	return e
}

func (e *promptEntry) KeyDown(k *fyne.KeyEvent) {
	if k.Name == desktop.KeyShiftLeft || k.Name == desktop.KeyShiftRight {
		e.shift = true
	}
	e.Entry.KeyDown(k)
}

func (e *promptEntry) KeyUp(k *fyne.KeyEvent) {
	if k.Name == desktop.KeyShiftLeft || k.Name == desktop.KeyShiftRight {
		e.shift = false
	}
	e.Entry.KeyUp(k)
}

func (e *promptEntry) TypedKey(k *fyne.KeyEvent) {
	switch k.Name {
	case fyne.KeyReturn, fyne.KeyEnter:
		if !e.shift {
			e.onSend()
			return
		}
		// With Shift held and no OnSubmitted, Entry inserts a newline.
	case fyne.KeyEscape:
		e.onEscape()
		return
	}
	e.Entry.TypedKey(k)
}

func (e *promptEntry) TypedShortcut(s fyne.Shortcut) {
	if cs, ok := s.(*desktop.CustomShortcut); ok && cs.KeyName == fyne.KeyN && cs.Modifier == fyne.KeyModifierShortcutDefault {
		e.onNewChat()
		return
	}
	e.Entry.TypedShortcut(s)
}

// samplingForm edits the chat's sampler settings, which every chat shares.
type samplingForm struct {
	temperature, topK, topP, minP, repeat, maxTokens *widget.Entry
}

func newSamplingForm(s settings.Sampling) *samplingForm {
	num := func(v string, parse func(string) error) *widget.Entry {
		e := widget.NewEntry()
		e.SetText(v)
		e.Validator = parse
		return e
	}
	isFloat := func(t string) error { _, err := strconv.ParseFloat(strings.TrimSpace(t), 32); return err }
	isInt := func(t string) error { _, err := strconv.Atoi(strings.TrimSpace(t)); return err }
	g := func(f float32) string { return strconv.FormatFloat(float64(f), 'g', -1, 32) }
	return &samplingForm{
		temperature: num(g(s.Temperature), isFloat),
		topK:        num(strconv.Itoa(s.TopK), isInt),
		topP:        num(g(s.TopP), isFloat),
		minP:        num(g(s.MinP), isFloat),
		repeat:      num(g(s.RepeatPenalty), isFloat),
		maxTokens:   num(strconv.Itoa(s.MaxTokens), isInt),
	}
}

func (f *samplingForm) items() []*widget.FormItem {
	return []*widget.FormItem{
		hintedItem("Temperature", f.temperature, "0 always takes the likeliest token"),
		hintedItem("Top-k", f.topK, "keep the k likeliest tokens; 0 keeps all"),
		hintedItem("Top-p", f.topP, "keep the likeliest tokens up to this probability; 1 keeps all"),
		hintedItem("Min-p", f.minP, "drop tokens below this fraction of the likeliest; 0 keeps all"),
		hintedItem("Repeat penalty", f.repeat, "above 1 makes recent tokens less likely; 1 is off"),
		hintedItem("Max tokens", f.maxTokens, "longest reply; 0 is until the model ends its turn"),
	}
}

// value is the settings the form holds, checked as the engine checks them.
func (f *samplingForm) value() (settings.Sampling, error) {
	var s settings.Sampling
	var errs []error
	float := func(e *widget.Entry, name string) float32 {
		v, err := strconv.ParseFloat(strings.TrimSpace(e.Text), 32)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %q is not a number", name, e.Text))
		}
		return float32(v)
	}
	integer := func(e *widget.Entry, name string) int {
		v, err := strconv.Atoi(strings.TrimSpace(e.Text))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %q is not a whole number", name, e.Text))
		}
		return v
	}
	s.Temperature = float(f.temperature, "temperature")
	s.TopK = integer(f.topK, "top-k")
	s.TopP = float(f.topP, "top-p")
	s.MinP = float(f.minP, "min-p")
	s.RepeatPenalty = float(f.repeat, "repeat penalty")
	s.MaxTokens = integer(f.maxTokens, "max tokens")
	if len(errs) > 0 {
		return s, errors.Join(errs...)
	}
	if s.MaxTokens < 0 {
		return s, fmt.Errorf("max tokens %d must not be negative", s.MaxTokens)
	}
	if err := s.Options(0).Validate(); err != nil {
		return s, err
	}
	return s, nil
}

// showSampling edits the sampler settings in a dialog; they are saved
// with the studio's settings and used from the next reply on.
func (cv *chatView) showSampling() {
	f := newSamplingForm(cv.st.settings.Sampling)
	dialog.ShowForm("Sampling", "Save", "Cancel", f.items(), func(ok bool) {
		if ok {
			cv.applySampling(f)
		}
	}, cv.st.win)
}

func (cv *chatView) applySampling(f *samplingForm) {
	s, err := f.value()
	if err != nil {
		cv.st.showError(err)
		return
	}
	cv.st.settings.Sampling = s
	cv.st.saveSettings()
}

// hintedItem is a form row with a hint under its entry.
func hintedItem(name string, e *widget.Entry, hint string) *widget.FormItem {
	it := widget.NewFormItem(name, e)
	it.HintText = hint
	return it
}
