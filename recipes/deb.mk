# The deb-en-XX recipes (Debian documentation corpora): data → prepare → train → translate → score.
# Included by recipes/deb-en-de/Makefile and recipes/deb-en-es/Makefile, which set SRC, TGT, RECIPE_DIR
# (and APERTIUM_PAIR where a rule-based system exists). Run with `make -C recipes/deb-en-de`.
#
# Every stage is a file target under work/, so `make` after a finished run does nothing, and after an
# interruption it redoes only what is missing (training resumes from its last checkpoint).
# Variables (make VAR=value):
#   DATA     corpus directory with train.SRC.gz train.TGT.gz dev.* test.*
#            (default: shared/data/deb-SRC-TGT three levels above the recipe directory)
#   MODELS   which systems to build and score: transformer, rnn or both (default both);
#            MODEL=rnn is a shorthand for MODELS=rnn
#   TIME     training budget in minutes per model (0 = none); STEPS: budget in updates (0 = none);
#            the transformer's cooldown decays over the budget, so it needs one of the two
#   DEVICE   auto, cpu, cuda, cuda:N, mps
#   BEAM     beam size of the beam-search systems (default 5)
#   TRAIN_ARGS  more arguments for `mtkit train`, e.g. TRAIN_ARGS="--set training.keep_last=10"
#            (not tracked: changing it alone does not train again)
#   PYTHON, MTKIT   the interpreter and the mtkit command

include $(RECIPE_DIR)/../common.mk

DATA ?= $(abspath $(RECIPE_DIR)/../../../shared/data/deb-$(SRC)-$(TGT))
MODEL ?=
MODELS ?= $(if $(MODEL),$(MODEL),transformer rnn)
TIME ?= 35
STEPS ?= 0
BEAM ?= 5
TRAIN_ARGS ?=
PLOT_SENTENCES ?= 3
DATA_DIR := $(abspath $(DATA))

$(foreach m,$(MODELS),$(if $(wildcard $(m).yaml),,\
    $(error MODELS: there is no $(m).yaml in $(RECIPE_DIR); use transformer, rnn or both)))

# The configs name these paths (work/data/..., work/data-bin, work/MODEL). Both share their data and
# bpe sections (tests/test_recipes.py checks it), so one data-bin, built from the first, serves both.
LINKS := $(WORK)/data
BIN := $(WORK)/data-bin
HYP := $(WORK)/hyp
PREPARE_CONFIG := transformer.yaml
CORPUS_FILES := train.$(SRC).gz train.$(TGT).gz dev.$(SRC) dev.$(TGT) test.$(SRC) test.$(TGT)
CORPUS := $(addprefix $(LINKS)/,$(CORPUS_FILES))

# the systems of the score table: each model with greedy and beam search, then the rule-based one
HYPS := $(foreach m,$(MODELS),$(HYP)/$(m).greedy.$(TGT) $(HYP)/$(m).beam$(BEAM).$(TGT))
# Apertium takes part when it is installed with the language pair (`apertium -l` lists the pairs).
APERTIUM := $(if $(APERTIUM_PAIR),$(shell command -v apertium >/dev/null 2>&1 && \
    apertium -l 2>/dev/null | tr -d ' \t' | grep -qx '$(APERTIUM_PAIR)' && echo yes))
SCORED := $(HYPS) $(if $(APERTIUM),$(HYP)/apertium.$(TGT))

.PHONY: all data prepare train translate score plots show clean
all: plots $(WORK)/scores.txt
data: $(CORPUS)
prepare: $(STAMPS)/prepared
train: $(foreach m,$(MODELS),$(STAMPS)/$(m).trained)
translate: $(HYPS)
plots: $(foreach m,$(MODELS),$(WORK)/attention/$(m)/.done)
score: $(WORK)/scores.txt

# -------------------------------------------------------------------------------------------- data
# Links, not copies. work/data/DATA records the corpus directory and changes only when DATA does; then
# every link is pointed anew, and everything downstream is redone. (make judges a link by the date of
# the file it points to, so the links themselves are made only when missing: order-only.)
MISSING = echo "error: $(DATA_DIR)/$(1) not found; set DATA=/path/to/deb-$(SRC)-$(TGT)" >&2; exit 1

$(LINKS)/DATA: FORCE
	@mkdir -p $(@D)
	@if [ ! -f $@ ] || [ "$$(cat $@)" != "$(DATA_DIR)" ]; then \
	    for f in $(CORPUS_FILES); do test -f $(DATA_DIR)/$$f || { $(call MISSING,$$f); }; done; \
	    for f in $(CORPUS_FILES); do ln -sfn $(DATA_DIR)/$$f $(LINKS)/$$f; done; \
	    echo "$(DATA_DIR)" > $@; echo "linked $(LINKS)/ to $(DATA_DIR)/"; fi

$(LINKS)/%: | $(LINKS)/DATA
	@test -f $(DATA_DIR)/$* || { $(call MISSING,$*); }
	ln -sfn $(DATA_DIR)/$* $@

# ----------------------------------------------------------------------------------------- prepare
# prepare rewrites meta.json only when its inputs or the data/bpe settings changed. The models depend on
# meta.json's own date, so editing the model section of one config does not retrain the other model.
$(STAMPS)/prepared: $(LINKS)/DATA $(CORPUS) $(PREPARE_CONFIG)
	@mkdir -p $(@D)
	$(MTKIT) prepare $(PREPARE_CONFIG)
	@touch $@

$(BIN)/meta.json: $(STAMPS)/prepared ;

# ------------------------------------------------------------------------------------------- train
# MODEL.yaml → work/MODEL: the shared rules (restart on a new config or data, resume on a new budget)
include $(RECIPE_DIR)/../train.mk

# --------------------------------------------------------------------------------------- translate
$(HYP)/%.greedy.$(TGT): $(STAMPS)/%.trained $(LINKS)/test.$(SRC)
	@mkdir -p $(@D)
	$(MTKIT) translate --model $(WORK)/$* --device $(DEVICE) --greedy -i $(LINKS)/test.$(SRC) -o $@.tmp
	@mv $@.tmp $@

$(HYP)/%.beam$(BEAM).$(TGT): $(STAMPS)/%.trained $(LINKS)/test.$(SRC)
	@mkdir -p $(@D)
	$(MTKIT) translate --model $(WORK)/$* --device $(DEVICE) --beam $(BEAM) -i $(LINKS)/test.$(SRC) -o $@.tmp
	@mv $@.tmp $@

# the rule-based reference system, when Debian's apertium and the language pair are installed
$(HYP)/apertium.$(TGT): $(LINKS)/test.$(SRC)
	@mkdir -p $(@D)
	apertium -u $(APERTIUM_PAIR) < $< > $@.tmp
	@mv $@.tmp $@

$(WORK)/attention/%/.done: $(STAMPS)/%.trained $(LINKS)/test.$(SRC)
	$(call short_lines,$(LINKS)/test.$(SRC),$(@D)/sample.$(SRC),$(PLOT_SENTENCES))
	$(MTKIT) translate --model $(WORK)/$* --device $(DEVICE) --beam $(BEAM) -i $(@D)/sample.$(SRC) \
	    -o $(@D)/sample.$(TGT) --attention-plot $(@D) --attention-plot-max $(PLOT_SENTENCES)
	@touch $@

# ------------------------------------------------------------------------------------------- score
# The first system is the baseline of the paired bootstrap test.
$(WORK)/scores.txt: $(SCORED) $(LINKS)/test.$(TGT)
	$(MTKIT) score $(addprefix --hyp ,$(SCORED)) --ref $(LINKS)/test.$(TGT) --metrics bleu,chrf,ter,wer > $@.tmp
	@mv $@.tmp $@
	$(show_scores)

define show_scores
@cat $(WORK)/scores.txt
$(if $(APERTIUM_PAIR),$(if $(APERTIUM),,@echo "note: apertium (with its $(APERTIUM_PAIR) pair) is not \
installed, so the rule-based system is not scored (apt-get install apertium-$(APERTIUM_PAIR))"))
@echo "attention heatmaps: $(foreach m,$(MODELS),$(WORK)/attention/$(m)/)"
endef

show:
	$(show_scores)

clean:
	rm -rf $(WORK)

# ------------------------------------------------------------------------------------------ glossary
# The glossary experiment (recipes/glossary.py, docs/translate.md#glossaries): a glossary built from the
# training data, then the test lines that contain one of its terms translated with the transformer
# without and with it (beam BEAM): term use, BLEU, chrF and speed in work/glossary/compare.txt.
.PHONY: glossary
glossary: $(WORK)/glossary/compare.txt

$(WORK)/glossary.tsv: $(LINKS)/train.$(SRC).gz $(LINKS)/train.$(TGT).gz $(RECIPE_DIR)/../glossary.py
	$(PYTHON) $(RECIPE_DIR)/../glossary.py build --src $(LINKS)/train.$(SRC).gz --tgt $(LINKS)/train.$(TGT).gz -o $@

$(WORK)/glossary/compare.txt: $(WORK)/glossary.tsv $(STAMPS)/transformer.trained $(LINKS)/test.$(SRC) $(LINKS)/test.$(TGT)
	@mkdir -p $(@D)
	$(PYTHON) $(RECIPE_DIR)/../glossary.py compare --model $(WORK)/transformer --glossary $< \
	    --src $(LINKS)/test.$(SRC) --ref $(LINKS)/test.$(TGT) --work $(@D) --mtkit "$(MTKIT)" \
	    --translate-args "--beam $(BEAM) --device $(DEVICE)" --json $(@D)/compare.json > $@.tmp
	@mv $@.tmp $@
	@cat $@
