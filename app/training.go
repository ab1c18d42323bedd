package app

import (
	"time"

	"github.com/hearthstudio/hearth/training"
	"github.com/hearthstudio/hearth/training/data"
)

// The fine-tuning job as the engine's clients see it (Engine.Train): what
// a run is asked, what it reports, what it leaves. These are training's
// own types under the names the studio and the command line use, so a
// client needs no import of training to fill a form or draw a loss plot.
type (
	// TrainConfig is a run: settings, files, save and validation cadence
	// (training.RunConfig).
	TrainConfig = training.RunConfig
	// TrainSettings are the choices of a run a checkpoint keeps.
	TrainSettings = training.Settings
	// TrainPreset is a named set of TrainSettings.
	TrainPreset = training.Preset
	// TrainProgress is a run's report after each event of its phase.
	TrainProgress = training.Progress
	// TrainPhase is what a run is doing.
	TrainPhase = training.Phase
	// TrainPause holds a run between steps.
	TrainPause = training.Pause
	// TrainResult is what a run wrote.
	TrainResult = training.Result
	// TrainState is a checkpoint's settings, step and loss history.
	TrainState = training.State
	// TrainPoint is one step's training or validation loss.
	TrainPoint = training.Point
	// DatasetReport says what a run made of its dataset.
	DatasetReport = data.Report
	// DatasetNote is a dataset line a report names, and why.
	DatasetNote = data.Note
	// DatasetLineError is an error in one line of a dataset.
	DatasetLineError = data.LineError
)

// The phases a TrainProgress reports (training.Phase*).
const (
	TrainPhaseData       = training.PhaseData
	TrainPhaseLoad       = training.PhaseLoad
	TrainPhaseStep       = training.PhaseStep
	TrainPhaseTrain      = training.PhaseTrain
	TrainPhaseValidating = training.PhaseValidating
	TrainPhaseValid      = training.PhaseValid
	TrainPhaseSaving     = training.PhaseSaving
	TrainPhaseCheckpoint = training.PhaseCheckpoint
	TrainPhaseResumed    = training.PhaseResumed
	TrainPhasePaused     = training.PhasePaused
	TrainPhaseDone       = training.PhaseDone
)

// DefaultValidShare is the fraction of a dataset's lines held out for
// validation unless a run says otherwise.
const DefaultValidShare = data.DefaultValid

// ErrDiverged wraps the error of a run stopped by a loss or gradient that
// is not a finite number.
var ErrDiverged = training.ErrDiverged

// TrainPresets are the preset choices, the first the default.
func TrainPresets() []TrainPreset { return training.Presets }

// TrainPresetByName finds a preset, ignoring case.
func TrainPresetByName(name string) (TrainPreset, bool) { return training.PresetByName(name) }

// ReadTrainState reads the state of the checkpoint at path without a
// model: a resume starts from its settings.
func ReadTrainState(path string) (TrainState, error) { return training.ReadState(path) }

// FormatETA is a run's time left as the studio and hearth train show it:
// seconds under a minute, then minutes, then hours and minutes.
func FormatETA(d time.Duration) string { return training.FormatETA(d) }
