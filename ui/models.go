package ui

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/layout"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/hearthstudio/hearth/app"
	"github.com/hearthstudio/hearth/app/library"
	"github.com/hearthstudio/hearth/app/settings"
	"github.com/hearthstudio/hearth/internal/units"
)

// modelsPanel is the Models tab: the library, or the first-run screen
// while the library is empty.
func modelsPanel(st *studio) fyne.CanvasObject {
	lib := libraryView(st)
	first := firstRunView(st)
	show := func() {
		empty := st.scanned && len(st.entries) == 0
		lib.Hidden, first.Hidden = empty, !empty
		lib.Refresh()
		first.Refresh()
	}
	st.onLibrary(show)
	show()
	return container.NewStack(lib, first)
}

// modelColumns are the library's columns after the name, which takes the
// width left. A LoRA adapter's row, listed under the models, fills them
// from its own header (adapter), "–" where it has no such thing.
var modelColumns = []struct {
	title   string
	width   float32
	cell    func(st *studio, e library.Entry) string
	adapter func(a *library.AdapterInfo) string
}{
	{"Source", 110, func(st *studio, e library.Entry) string { return st.sourceTitle(e) }, nil},
	{"Architecture", 110, func(_ *studio, e library.Entry) string {
		return infoField(e, func(i *library.Info) string { return i.Arch })
	}, func(a *library.AdapterInfo) string { return orDash(a.Arch) }},
	{"Parameters", 95, func(_ *studio, e library.Entry) string {
		return infoField(e, func(i *library.Info) string { return units.Count(uint64(i.Params)) })
	}, func(a *library.AdapterInfo) string {
		if a.Params == 0 {
			return "–"
		}
		return units.Count(uint64(a.Params))
	}},
	{"Quant", 85, func(_ *studio, e library.Entry) string {
		return infoField(e, func(i *library.Info) string { return i.Quant })
	}, func(a *library.AdapterInfo) string {
		if a.Rank == 0 {
			return "LoRA"
		}
		return fmt.Sprintf("LoRA r%d", a.Rank)
	}},
	{"Size", 90, func(_ *studio, e library.Entry) string { return settings.FormatSize(e.Size) }, nil},
	{"Context", 80, func(_ *studio, e library.Entry) string {
		return infoField(e, func(i *library.Info) string { return formatContext(i.Context) })
	}, func(*library.AdapterInfo) string { return "–" }},
	{"GPU memory", 150, func(st *studio, e library.Entry) string { return memoryCell(st, e) },
		func(*library.AdapterInfo) string { return "–" }},
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

// minNameWidth keeps the name column readable: the tab's minimum width,
// and so the window's, leaves it at least this much.
const minNameWidth = 200

func libraryView(st *studio) *fyne.Container {
	var view []library.Entry // the entries the search matches
	selected := ""           // the selected entry's path
	search := widget.NewEntry()
	search.SetPlaceHolder("Search by name, source, architecture or quantization")
	search.ActionItem = widget.NewIcon(theme.SearchIcon())

	list := widget.NewList(
		func() int { return len(view) },
		newModelRow,
		func(id widget.ListItemID, o fyne.CanvasObject) {
			if id < len(view) {
				updateModelRow(st, o.(*fyne.Container), view[id])
			}
		},
	)
	// With none selected, the details show the loaded model: the one its
	// Unload button frees.
	details := modelDetails(st, func() (library.Entry, bool) {
		path := selected
		if path == "" {
			path = st.resident()
		}
		for _, e := range append(slices.Clone(st.entries), st.adapters...) {
			if path != "" && e.Path == path {
				return e, true
			}
		}
		return library.Entry{}, false
	})
	list.OnSelected = func(id widget.ListItemID) {
		if id < len(view) {
			selected = view[id].Path
			details.refresh()
		}
	}

	summary := widget.NewLabel("")
	// The library's listeners are told of every step of a load too; the
	// list is filtered again only when the entries or the search changed.
	shownGen, shownQuery := -1, ""
	filter := func() {
		q := strings.ToLower(strings.TrimSpace(search.Text))
		if shownGen == st.entriesGen && shownQuery == q && st.scanned {
			details.refresh()
			return
		}
		shownGen, shownQuery = st.entriesGen, q
		view = view[:0]
		// The adapters come after the models: they are not loaded, but
		// chatted with on one of the models above.
		all := append(slices.Clone(st.entries), st.adapters...)
		for _, e := range all {
			if q == "" || matches(e, q) {
				view = append(view, e)
			}
		}
		found := plural(len(st.entries), "model")
		if len(st.adapters) > 0 {
			found += " and " + plural(len(st.adapters), "adapter")
		}
		switch {
		case !st.scanned:
			summary.SetText("Looking for models…")
		case q != "":
			summary.SetText(fmt.Sprintf("%d of %s match “%s”", len(view), found, search.Text))
		default:
			text := fmt.Sprintf("%s on this machine", found)
			if n := unusable(all); n > 0 {
				text += fmt.Sprintf(" · %d cannot be used (select one to see why)", n)
			}
			summary.SetText(text)
		}
		if selected == "" {
			// Show what is loaded until the user picks something else.
			selected = st.resident()
		}
		list.UnselectAll()
		if i := slices.IndexFunc(view, func(e library.Entry) bool { return e.Path == selected }); i >= 0 {
			list.Select(i)
		}
		list.Refresh()
		details.refresh()
	}
	search.OnChanged = func(string) { filter() }
	st.onLibrary(filter)
	st.onStatus(func(app.Status) { list.Refresh(); details.refresh() })

	heading := headingLabel("Models")
	addFolder := widget.NewButtonWithIcon("Add folder…", theme.FolderOpenIcon(), func() { addFolderDialog(st) })
	rescan := widget.NewButtonWithIcon("Rescan", theme.ViewRefreshIcon(), func() { st.rescan(nil) })
	download := widget.NewButtonWithIcon("Download…", theme.DownloadIcon(), func() { downloadDialog(st) })
	top := container.NewVBox(
		container.NewBorder(nil, nil, heading, computeControls(st)),
		container.NewBorder(nil, nil, nil, container.NewHBox(addFolder, rescan, download), search),
	)
	table := container.NewBorder(modelHeader(), summary, nil, nil, list)
	return container.NewPadded(container.NewBorder(top, details.card, nil, nil, table))
}

func unusable(entries []library.Entry) int {
	n := 0
	for _, e := range entries {
		if e.Err != "" {
			n++
		}
	}
	return n
}

func matches(e library.Entry, q string) bool {
	fields := []string{e.Name, e.Source, sourceTitle(e.Source)}
	if e.Info != nil {
		fields = append(fields, e.Info.Arch, e.Info.Quant, e.Info.ModelName)
	}
	if a := e.Adapter; a != nil {
		fields = append(fields, "adapter", "lora", a.Arch, a.BaseModel)
		fields = append(fields, a.Bases...)
	}
	for _, f := range fields {
		if strings.Contains(strings.ToLower(f), q) {
			return true
		}
	}
	return false
}

// columnsLayout places its objects side by side: the first takes the width
// the fixed widths of the others leave, at least minNameWidth.
type columnsLayout struct{ widths []float32 }

func (c columnsLayout) fixed() float32 {
	w := float32(0)
	for _, x := range c.widths {
		w += x + theme.Padding()
	}
	return w
}

func (c columnsLayout) Layout(objs []fyne.CanvasObject, size fyne.Size) {
	x := float32(0)
	for i, o := range objs {
		w := max(size.Width-c.fixed(), minNameWidth)
		if i > 0 {
			w = c.widths[i-1]
		}
		o.Move(fyne.NewPos(x, 0))
		o.Resize(fyne.NewSize(w, size.Height))
		x += w + theme.Padding()
	}
}

func (c columnsLayout) MinSize(objs []fyne.CanvasObject) fyne.Size {
	h := float32(0)
	for _, o := range objs {
		h = max(h, o.MinSize().Height)
	}
	return fyne.NewSize(minNameWidth+c.fixed(), h)
}

func columnWidths() []float32 {
	w := make([]float32, len(modelColumns))
	for i, c := range modelColumns {
		w[i] = c.width
	}
	return w
}

func modelHeader() fyne.CanvasObject {
	cells := []fyne.CanvasObject{widget.NewLabelWithStyle("Name", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})}
	for _, c := range modelColumns {
		cells = append(cells, widget.NewLabelWithStyle(c.title, fyne.TextAlignLeading, fyne.TextStyle{Bold: true}))
	}
	return container.NewVBox(container.New(columnsLayout{columnWidths()}, cells...), widget.NewSeparator())
}

// newModelRow is a list row: the columns of a usable model, or the name
// and the reason it cannot be used across the rest of the row.
func newModelRow() fyne.CanvasObject {
	truncated := func() *widget.Label {
		l := widget.NewLabel("")
		l.Truncation = fyne.TextTruncateEllipsis
		return l
	}
	cells := []fyne.CanvasObject{truncated()}
	for range modelColumns {
		cells = append(cells, truncated())
	}
	columns := container.New(columnsLayout{columnWidths()}, cells...)
	problem := truncated()
	problem.Importance = widget.DangerImportance
	rest := columnsLayout{columnWidths()}.fixed() - modelColumns[0].width - 2*theme.Padding()
	broken := container.New(columnsLayout{[]float32{modelColumns[0].width, rest}}, truncated(), truncated(), problem)
	return container.NewStack(columns, broken)
}

func updateModelRow(st *studio, row *fyne.Container, e library.Entry) {
	columns, broken := row.Objects[0].(*fyne.Container), row.Objects[1].(*fyne.Container)
	columns.Hidden, broken.Hidden = e.Err != "", e.Err == ""
	name := e.Name
	loaded := e.Path == st.resident()
	if loaded {
		name += "  · loaded"
	}
	if e.Adapter != nil {
		name += "  · adapter"
	}
	if e.Err != "" {
		setLabel(broken.Objects[0], name, false, widget.MediumImportance)
		setLabel(broken.Objects[1], st.sourceTitle(e), false, widget.MediumImportance)
		setLabel(broken.Objects[2], shortProblem(e.Err), false, widget.DangerImportance)
		return
	}
	imp := widget.MediumImportance
	if loaded {
		imp = widget.SuccessImportance
	}
	setLabel(columns.Objects[0], name, loaded, imp)
	for i, c := range modelColumns {
		imp := widget.MediumImportance
		if c.title == "GPU memory" && st.overBudget(e) != nil {
			imp = widget.WarningImportance
		}
		text := c.cell(st, e)
		if e.Adapter != nil && c.adapter != nil {
			text = c.adapter(e.Adapter)
		}
		setLabel(columns.Objects[i+1], text, false, imp)
	}
}

func setLabel(o fyne.CanvasObject, text string, bold bool, imp widget.Importance) {
	l := o.(*widget.Label)
	if l.Text == text && l.TextStyle.Bold == bold && l.Importance == imp {
		return
	}
	l.Text, l.TextStyle.Bold, l.Importance = text, bold, imp
	l.Refresh()
}

// detailsCard is the panel under the list: the selected model with its
// Load and Unload buttons and the progress of a load.
type detailsCard struct {
	card    *widget.Card
	refresh func()
}

func modelDetails(st *studio, selected func() (library.Entry, bool)) *detailsCard {
	about := widget.NewLabel("")
	about.Wrapping = fyne.TextWrapWord
	memory := widget.NewLabel("")
	memory.Wrapping = fyne.TextWrapWord
	problem := widget.NewLabel("")
	problem.Wrapping = fyne.TextWrapWord
	problem.Importance = widget.DangerImportance
	progress := widget.NewProgressBar()
	progressText := widget.NewLabel("")
	var current library.Entry
	load := widget.NewButtonWithIcon("Load", theme.MediaPlayIcon(), func() {
		if current.Adapter != nil {
			st.chatWithAdapter(current)
			return
		}
		st.loadModel(current)
	})
	load.Importance = widget.HighImportance
	unload := widget.NewButtonWithIcon("Unload", theme.MediaStopIcon(), st.unloadModel)
	buttons := container.NewHBox(load, unload)
	loading := container.NewBorder(nil, nil, progressText, nil, progress)
	body := container.NewVBox(about, memory, problem, container.NewBorder(nil, nil, buttons, nil, loading))
	card := widget.NewCard("", "", body)

	d := &detailsCard{card: card}
	d.refresh = func() {
		// What shows changes with the model: lay the card out again.
		defer body.Refresh()
		e, ok := selected()
		current = e
		resident := st.resident()
		loading.Hidden = st.loading == ""
		if st.loading != "" {
			progressText.SetText("Loading " + st.loading + "…")
			if st.loadTotal > 0 {
				progress.SetValue(float64(st.loadDone) / float64(st.loadTotal))
				progressText.SetText(fmt.Sprintf("Loading %s: %s of %s", st.loading, settings.FormatSize(st.loadDone), settings.FormatSize(st.loadTotal)))
			} else {
				progress.SetValue(0)
			}
		}
		unload.Hidden = resident == ""
		if !ok {
			card.SetTitle("No model selected")
			card.SetSubTitle("")
			about.SetText("Select a model in the list to see what it is and load it. Drop a .gguf file on the window to add one.")
			memory.SetText("")
			memory.Hidden, problem.Hidden, load.Hidden = true, true, true
			return
		}
		card.SetTitle(e.Name)
		card.SetSubTitle(tildePath(e.Path))
		if e.Adapter != nil {
			// An adapter is not loaded: a chat applies it to its base.
			about.SetText(describeAdapter(st, e))
			memory.SetText(adapterFits(e))
			memory.Importance, memory.Hidden = widget.MediumImportance, false
			memory.Refresh()
			problem.SetText(e.Err)
			problem.Hidden = e.Err == ""
			load.Hidden = false
			load.SetText("Chat with it")
			if st.adapterBase(e) == "" || st.loading != "" {
				load.Disable()
			} else {
				load.Enable()
			}
			return
		}
		about.SetText(describeEntry(st, e))
		memory.SetText(memoryLine(st, e))
		memory.Hidden = memory.Text == ""
		if err := st.overBudget(e); err != nil {
			memory.Importance = widget.WarningImportance
		} else {
			memory.Importance = widget.MediumImportance
		}
		memory.Refresh()
		msg := e.Err
		if msg == "" {
			msg = st.loadErrs[e.Path]
		}
		problem.SetText(msg)
		problem.Hidden = msg == ""
		load.Hidden = false
		switch {
		case e.Path == resident:
			load.SetText("Loaded")
			load.Disable()
		case e.Err != "" || st.loading != "":
			load.SetText("Load")
			load.Disable()
		default:
			load.SetText("Load")
			load.Enable()
		}
	}
	d.refresh()
	return d
}

// describeEntry is the details' first line: what the model is.
func describeEntry(st *studio, e library.Entry) string {
	parts := []string{st.sourceTitle(e)}
	if i := e.Info; i != nil {
		if i.ModelName != "" {
			parts = append(parts, i.ModelName)
		}
		if i.Arch != "" {
			parts = append(parts, i.Arch+" architecture")
		}
		if i.Params > 0 {
			parts = append(parts, units.Count(uint64(i.Params))+" parameters")
		}
		if i.Quant != "" {
			parts = append(parts, i.Quant)
		}
		if i.Context > 0 {
			parts = append(parts, "trained for "+formatContext(i.Context)+" tokens of context")
		}
	}
	if e.Size > 0 {
		parts = append(parts, settings.FormatSize(e.Size)+" on disk")
	}
	return strings.Join(parts, " · ")
}

// describeAdapter is the details' first line for a LoRA adapter.
func describeAdapter(st *studio, e library.Entry) string {
	a := e.Adapter
	parts := []string{"LoRA adapter", st.sourceTitle(e), "for " + a.For()}
	if a.Format == library.AdapterPEFT {
		parts[0] = "LoRA adapter (PEFT folder)"
	}
	if a.Rank > 0 {
		parts = append(parts, fmt.Sprintf("rank %d", a.Rank))
	}
	if a.Alpha != 0 {
		parts = append(parts, fmt.Sprintf("alpha %g", a.Alpha))
	}
	if a.Targets > 0 {
		parts = append(parts, plural(a.Targets, "weight")+" adapted")
	}
	if e.Size > 0 {
		parts = append(parts, settings.FormatSize(e.Size)+" on disk")
	}
	return strings.Join(parts, " · ")
}

// adapterFits says which of the library's models an adapter fits.
func adapterFits(e library.Entry) string {
	switch {
	case e.Err != "":
		return ""
	case len(e.Adapter.Bases) > 0:
		return "Fits " + strings.Join(e.Adapter.Bases, ", ") + ". Chat with it on one of them, or choose it in a chat's Adapter menu."
	}
	return "No model in the library fits it: add its base model (" + e.Adapter.For() + ") to chat with it."
}

// adapterBase is the model to chat with adapter e on: the loaded one if it
// fits, else the first that does; "" when none does.
func (st *studio) adapterBase(e library.Entry) string {
	if e.Adapter == nil || e.Err != "" || len(e.Adapter.Bases) == 0 {
		return ""
	}
	if m, ok := st.entryByPath(st.resident()); ok && slices.Contains(e.Adapter.Bases, m.Name) {
		return m.Name
	}
	return e.Adapter.Bases[0]
}

// chatWithAdapter opens a chat that answers with adapter e on its base
// model, loading the model unless it is the resident one.
func (st *studio) chatWithAdapter(e library.Entry) {
	if base := st.adapterBase(e); base != "" && st.chat != nil {
		st.chat.useAdapter(base, e.Path)
	}
}

// memoryLine is the details' estimate of GPU memory, against the limit.
func memoryLine(st *studio, e library.Entry) string {
	if e.Info == nil || e.Info.Memory.Total() == 0 {
		return ""
	}
	m := e.Info.Memory.Slots(st.slots())
	at := formatContext(e.Info.MemoryContext) + " tokens of context"
	if n := st.settings.Parallel; n > 1 {
		at += fmt.Sprintf(", %d replies at once", n)
	}
	s := fmt.Sprintf("Needs about %s of GPU memory at %s: weights %s, KV cache %s, activations %s.",
		settings.FormatSize(m.Total()), at, settings.FormatSize(m.Weights), settings.FormatSize(m.KV), settings.FormatSize(m.Activations))
	if err := st.overBudget(e); err != nil {
		return s + " That is over the limit of " + settings.FormatSize(int64(st.budget())) + "."
	}
	if b := st.budget(); b > 0 {
		return s + " The limit is " + settings.FormatSize(int64(b)) + "."
	}
	return s
}

func memoryCell(st *studio, e library.Entry) string {
	if e.Info == nil || e.Info.Memory.Total() == 0 {
		return "–"
	}
	s := settings.FormatSize(e.Info.Memory.Slots(st.slots()).Total())
	if st.overBudget(e) != nil {
		s += " · over limit"
	}
	return s
}

func infoField(e library.Entry, f func(*library.Info) string) string {
	if e.Info == nil {
		return "–"
	}
	if s := f(e.Info); s != "" {
		return s
	}
	return "–"
}

// sourceTitle names where e comes from. The library lists a dropped file
// as a folder of one (the settings give it as a root), so the studio
// names it a file.
func (st *studio) sourceTitle(e library.Entry) string {
	if e.Source == library.SourceFolder && slices.Contains(st.settings.Files, e.Path) {
		return "File"
	}
	return sourceTitle(e.Source)
}

func sourceTitle(source string) string {
	switch source {
	case library.SourceOllama:
		return "Ollama"
	case library.SourceHuggingFace:
		return "Hugging Face"
	case library.SourceLMStudio:
		return "LM Studio"
	case library.SourceFolder:
		return "Folder"
	case library.SourceFile:
		return "File"
	}
	return source
}

// computeControls choose where models run (an adapter, or the CPU) and the
// GPU memory limit. Either change restarts the engine.
func computeControls(st *studio) fyne.CanvasObject {
	const (
		automatic = "Automatic" // the status bar says where that is and why
		cpuOnly   = "CPU only"
	)
	choose := widget.NewSelect([]string{automatic, cpuOnly}, nil)
	current := func() string {
		switch {
		case st.settings.Backend == "cpu":
			return cpuOnly
		case st.settings.Adapter == "":
			return automatic
		}
		return st.settings.Adapter
	}
	choose.SetSelected(current())
	choose.OnChanged = func(v string) {
		if v == current() {
			return
		}
		switch v {
		case automatic:
			st.settings.Backend, st.settings.Adapter = "auto", ""
		case cpuOnly:
			st.settings.Backend, st.settings.Adapter = "cpu", ""
		default:
			st.settings.Backend, st.settings.Adapter = "gpu", v
		}
		st.saveSettings()
		st.restartEngine()
		st.libraryChanged() // the memory limit applies to the GPU only
	}
	// Listing adapters opens the Vulkan (Metal, DX12) instance: a blocking
	// call that can take a second on some drivers.
	go func() {
		list, err := app.Adapters(app.GPUOptions{Backend: app.GPUOptionsFromEnv().Backend})
		st.post(func() {
			if err != nil {
				st.showError(fmt.Errorf("the GPU adapters could not be listed: %w", err))
			}
			opts := []string{automatic}
			for _, a := range list {
				opts = append(opts, a.Label())
			}
			// OnChanged ignores the choice it is told of here: it is the
			// current one.
			choose.Options = append(opts, cpuOnly)
			choose.SetSelected(current())
			choose.Refresh()
		})
	}()

	limit := widget.NewEntry()
	limit.SetPlaceHolder("no limit")
	limit.SetText(st.settings.GPUMemory)
	limit.Validator = func(s string) error {
		_, err := parseMemory(s)
		return err
	}
	limit.OnSubmitted = func(s string) {
		s = strings.TrimSpace(s)
		if _, err := parseMemory(s); err != nil {
			st.showError(fmt.Errorf("GPU memory limit: %w", err))
			return
		}
		if s == st.settings.GPUMemory {
			return
		}
		st.settings.GPUMemory = s
		st.saveSettings()
		st.restartEngine()
		st.libraryChanged()
	}
	// Replies at once: the chat's and the API server's clients' share the
	// engine, and each slot is a KV cache of the context's size.
	parallel := widget.NewSelect(parallelChoices, nil)
	parallel.SetSelected(strconv.Itoa(max(st.settings.Parallel, 1)))
	parallel.OnChanged = func(v string) {
		n, err := strconv.Atoi(v)
		if err != nil || n == max(st.settings.Parallel, 1) {
			return
		}
		st.settings.Parallel = n
		st.saveSettings()
		st.restartEngine()
		st.libraryChanged() // the memory estimates count a cache per reply
	}
	// A fine-tuning run holds the engine's device for its whole length: a
	// new engine on another adapter would open a second device beside it.
	st.onStatus(func(s app.Status) {
		setEnabled(s.Training == "", choose, limit, parallel)
	})
	limitBox := container.NewGridWrap(fyne.NewSize(110, limit.MinSize().Height), limit)
	chooseBox := container.NewGridWrap(fyne.NewSize(270, choose.MinSize().Height), choose)
	return container.NewHBox(widget.NewLabel("Run on"), chooseBox, widget.NewLabel("GPU memory limit"), limitBox,
		widget.NewLabel("Replies at once"), parallel)
}

// addFolderDialog asks for a folder of models, adds it to the settings and
// scans it.
func addFolderDialog(st *studio) {
	d := dialog.NewFolderOpen(func(uri fyne.ListableURI, err error) {
		if err != nil {
			st.showError(err)
			return
		}
		if uri == nil {
			return // canceled
		}
		st.addFolder(uri.Path())
	}, st.win)
	d.Resize(fyne.NewSize(800, 560))
	d.Show()
}

// addFolder adds dir to the library's folders, saves it and rescans.
func (st *studio) addFolder(dir string) {
	if !slices.Contains(st.settings.Folders, dir) {
		st.settings.Folders = append(st.settings.Folders, dir)
		st.saveSettings()
	}
	st.rescan(nil)
}

// parallelChoices are the Models tab's replies at once.
var parallelChoices = []string{"1", "2", "4", "8", "16"}

// parseMemory reads the GPU memory limit as it is typed: blank is no
// limit, anything else a size as --gpu-memory takes it.
func parseMemory(s string) (uint64, error) {
	if strings.TrimSpace(s) == "" {
		return 0, nil
	}
	return settings.ParseSize(s)
}

// formatContext is a context length: 8192 as 8K, 131072 as 128K.
func formatContext(n int) string {
	switch {
	case n <= 0:
		return "–"
	case n%1024 == 0:
		return fmt.Sprintf("%dK", n/1024)
	}
	return strconv.Itoa(n)
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// shortProblem is a model's problem in a line of the list: the library's
// messages lead with the file and name every path in full, which the
// details under the list show; here the paths shrink to their base names.
func shortProblem(msg string) string {
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	for {
		i := strings.Index(msg, ": ")
		if i <= 0 || !filepath.IsAbs(msg[:i]) {
			break
		}
		msg = msg[i+2:]
	}
	words := strings.Fields(msg)
	for i, w := range words {
		if filepath.IsAbs(strings.TrimRight(w, ":,;")) {
			w = filepath.Base(w)
		}
		words[i] = longDigest.ReplaceAllString(w, "$1…")
	}
	return strings.Join(words, " ")
}

// longDigest is a content hash as stores name blobs (sha256-<64 hex>),
// of which the list shows the first 12 digits, as Ollama's own list does.
var longDigest = regexp.MustCompile(`((?:sha256[-:])?[0-9a-f]{12})[0-9a-f]{52}`)

// spacer is a fixed gap, for the first-run screen's sections.
func spacer(h float32) fyne.CanvasObject {
	return container.New(layout.NewGridWrapLayout(fyne.NewSize(1, h)))
}
