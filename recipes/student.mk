# Students (docs/distill.md): sequence-level knowledge distillation of a recipe's Transformer (the
# teacher) into smaller students, exported to CTranslate2 int8 with vocabulary shortlists, scored and
# timed in one table. Included by recipes/deb-en-de/Makefile after deb.mk.
#   make student        teacher → distilled corpus → students → exports → scores → speed table
#   make student-show   the table again
# Variables (make VAR=value; each is tracked: changing one redoes what depends on it, and only that):
#   TEACHER          the recipe's model that teaches (default transformer, trained by the recipe for TIME)
#   STUDENTS         student configs trained on the distilled corpus (default student-base student-tiny);
#                    the first is also trained on the original pairs of the same sources: the control
#   STUDENT_TIME     training minutes of each student (default 35, the teacher's)
#   STUDENT_LINES    distil the first N training pairs (0 = all)
#   DISTILL_BEAM     the teacher's beam (default 5)
#   DISTILL_ARGS     more `mtkit distill` options (default --min-confidence 0.05 --max-length-ratio 3)
#   SHORTLIST, SHORTLIST_FREQUENT   `mtkit export --shortlist K --shortlist-frequent F` (50 and 500)
#   SPEED_RUNS       timed runs of each system and search (default 3; the median is reported)
# `make -j2 student TRAIN_ARGS="--set training.threads=1"` trains the students side by side, one core each.
# Every stage writes a file under work/student/, so an interrupted run resumes where it stopped; the
# teacher's translation resumes line by line (`mtkit translate --resume`, into teacher.part).

TEACHER ?= transformer
STUDENTS ?= student-base student-tiny
STUDENT_TIME ?= 35
STUDENT_LINES ?= 0
DISTILL_BEAM ?= 5
DISTILL_ARGS ?= --min-confidence 0.05 --max-length-ratio 3
SHORTLIST ?= 50
SHORTLIST_FREQUENT ?= 500
SPEED_RUNS ?= 3

SDIR := $(WORK)/student
SSTAMP := $(STAMPS)/student
CONTROL := $(firstword $(STUDENTS))-original
STUDENT_SYSTEMS := $(STUDENTS:%=%-distilled) $(CONTROL)
# every system as int8 exports, without and with the shortlist; the teacher first (the table's baseline)
EXPORTS := $(foreach m,teacher $(STUDENT_SYSTEMS),$(m)-int8 $(m)-int8-sl)
SEARCHES := greedy beam$(BEAM)
STUDENT_HYPS := $(foreach e,$(EXPORTS),$(foreach s,$(SEARCHES),$(SDIR)/hyp/$(e).$(s).$(TGT)))

.PHONY: student student-show
student: $(SDIR)/table.md
student-show:
	@cat $(SDIR)/table.md

$(SSTAMP)/lines: FORCE
	$(call value_stamp,$@,lines=$(STUDENT_LINES))
$(SSTAMP)/teacher-search: FORCE
	$(call value_stamp,$@,teacher=$(TEACHER) beam=$(DISTILL_BEAM))
$(SSTAMP)/distill-args: FORCE
	$(call value_stamp,$@,$(DISTILL_ARGS))
$(SSTAMP)/budget: FORCE
	$(call value_stamp,$@,max_time=$(STUDENT_TIME))
$(SSTAMP)/shortlist: FORCE
	$(call value_stamp,$@,k=$(SHORTLIST) frequent=$(SHORTLIST_FREQUENT))

# 1. the training pairs to distil (the first STUDENT_LINES; plain text, line for line)
$(SDIR)/source.$(SRC) $(SDIR)/original.$(TGT) &: $(SSTAMP)/lines $(LINKS)/train.$(SRC).gz $(LINKS)/train.$(TGT).gz
	@mkdir -p $(SDIR)
	$(PYTHON) $(RECIPE_DIR)/../head_pairs.py $(STUDENT_LINES) $(LINKS)/train.$(SRC).gz $(LINKS)/train.$(TGT).gz \
	    $(SDIR)/source.$(SRC) $(SDIR)/original.$(TGT)

# 2. the teacher, exported (int8: what distils fastest on a CPU, and the table's teacher)
$(SDIR)/export/teacher-int8/mtkit_export.json: $(STAMPS)/$(TEACHER).trained
	$(MTKIT) export --model $(WORK)/$(TEACHER) -o $(@D) --quantization int8
$(SDIR)/export/teacher-int8-sl/mtkit_export.json: $(STAMPS)/$(TEACHER).trained $(SSTAMP)/shortlist
	$(MTKIT) export --model $(WORK)/$(TEACHER) -o $(@D) --quantization int8 --shortlist $(SHORTLIST) \
	    --shortlist-frequent $(SHORTLIST_FREQUENT)

# 3. its beam translations of the source, with confidence; resumable (a kill loses at most one chunk)
$(SDIR)/teacher.hyp: $(SDIR)/export/teacher-int8/mtkit_export.json $(SDIR)/source.$(SRC) $(SSTAMP)/teacher-search
	@for f in $^; do if [ -f $(SDIR)/teacher.part ] && [ $(SDIR)/teacher.part -ot $$f ]; then \
	    echo "starting the teacher's translation afresh: $$f changed"; rm -f $(SDIR)/teacher.part; fi; done
	$(MTKIT) translate --model $(SDIR)/export/teacher-int8 --beam $(DISTILL_BEAM) --scores --resume \
	    -i $(SDIR)/source.$(SRC) -o $(SDIR)/teacher.part
	mv $(SDIR)/teacher.part $@

# 4. the student's corpus, and the counts of what was dropped
$(SDIR)/distilled.$(SRC) $(SDIR)/distilled.$(TGT) &: $(SDIR)/teacher.hyp $(SSTAMP)/distill-args
	$(MTKIT) distill --source $(SDIR)/source.$(SRC) --translations $< --original-target $(SDIR)/original.$(TGT) \
	    --out-source $(SDIR)/distilled.$(SRC) --out-target $(SDIR)/distilled.$(TGT) \
	    --report $(SDIR)/distill.json $(DISTILL_ARGS)

# 5. both corpora prepared with the teacher's BPE (same vocabulary, same dev and test sets)
$(SDIR)/bin-distilled/meta.json: $(SDIR)/distilled.$(SRC) $(SDIR)/distilled.$(TGT)
$(SDIR)/bin-original/meta.json: $(SDIR)/source.$(SRC) $(SDIR)/original.$(TGT)
$(SDIR)/bin-distilled/meta.json $(SDIR)/bin-original/meta.json: $(PREPARE_CONFIG) $(STAMPS)/$(TEACHER).trained
	$(MTKIT) prepare $(PREPARE_CONFIG) --set data.train_src=$(filter %.$(SRC),$^) \
	    --set data.train_tgt=$(filter %.$(TGT),$^) --set data.dir=$(@D) --set bpe.model_from=$(WORK)/$(TEACHER)

# 6. the students: a new config or new data starts afresh, a new STUDENT_TIME resumes
student_data = $(lastword $(subst -, ,$(1)))
student_arch = $(patsubst %-$(call student_data,$(1)),%,$(1))
.SECONDEXPANSION:
$(STUDENT_SYSTEMS:%=$(SSTAMP)/%.fresh): $(SSTAMP)/%.fresh: $$(call student_arch,$$*).yaml \
    $(SDIR)/bin-$$(call student_data,$$*)/meta.json
	rm -rf $(SDIR)/$*
	@mkdir -p $(@D)
	@touch $@
$(STUDENT_SYSTEMS:%=$(SSTAMP)/%.trained): $(SSTAMP)/%.trained: $(SSTAMP)/%.fresh $(SSTAMP)/budget
	$(MTKIT) train $(call student_arch,$*).yaml --max-time $(STUDENT_TIME) --device $(DEVICE) \
	    --set data.dir=$(SDIR)/bin-$(call student_data,$*) --set training.model_dir=$(SDIR)/$* $(TRAIN_ARGS)
	@touch $@

# 7. int8 exports, without and with the shortlist (counted on the data each model was trained on)
$(STUDENT_SYSTEMS:%=$(SDIR)/export/%-int8/mtkit_export.json): $(SDIR)/export/%-int8/mtkit_export.json: \
    $(SSTAMP)/%.trained
	$(MTKIT) export --model $(SDIR)/$* -o $(@D) --quantization int8
$(STUDENT_SYSTEMS:%=$(SDIR)/export/%-int8-sl/mtkit_export.json): $(SDIR)/export/%-int8-sl/mtkit_export.json: \
    $(SSTAMP)/%.trained $(SSTAMP)/shortlist
	$(MTKIT) export --model $(SDIR)/$* -o $(@D) --quantization int8 --shortlist $(SHORTLIST) \
	    --shortlist-frequent $(SHORTLIST_FREQUENT)

# 8. the test set through every export and search, scored (paired bootstrap against the first system:
#    the teacher; then the control against each distilled student), and timed
$(SDIR)/hyp/%.greedy.$(TGT): $(SDIR)/export/%/mtkit_export.json $(LINKS)/test.$(SRC)
	@mkdir -p $(@D)
	$(MTKIT) translate --model $(SDIR)/export/$* --greedy -i $(LINKS)/test.$(SRC) -o $@
$(SDIR)/hyp/%.beam$(BEAM).$(TGT): $(SDIR)/export/%/mtkit_export.json $(LINKS)/test.$(SRC)
	@mkdir -p $(@D)
	$(MTKIT) translate --model $(SDIR)/export/$* --beam $(BEAM) -i $(LINKS)/test.$(SRC) -o $@

$(SDIR)/scores.txt: $(STUDENT_HYPS) $(LINKS)/test.$(TGT)
	@rm -f $@.tmp
	$(foreach s,$(SEARCHES),$(MTKIT) score $(foreach e,$(EXPORTS),--hyp $(SDIR)/hyp/$(e).$(s).$(TGT)) \
	    --ref $(LINKS)/test.$(TGT) --metrics bleu,chrf >> $@.tmp && \
	    $(MTKIT) score --hyp $(SDIR)/hyp/$(CONTROL)-int8.$(s).$(TGT) \
	    $(foreach m,$(STUDENTS),--hyp $(SDIR)/hyp/$(m)-distilled-int8.$(s).$(TGT)) \
	    --ref $(LINKS)/test.$(TGT) --metrics bleu,chrf >> $@.tmp &&) true
	@mv $@.tmp $@

$(SDIR)/table.md: $(SDIR)/scores.txt $(RECIPE_DIR)/../student_table.py $(SSTAMP)/budget
	$(PYTHON) $(RECIPE_DIR)/../student_table.py --exports $(SDIR)/export --systems "$(EXPORTS)" \
	    --searches "$(SEARCHES)" --source $(LINKS)/test.$(SRC) --ref $(LINKS)/test.$(TGT) --runs $(SPEED_RUNS) \
	    --mtkit "$(MTKIT)" --distill-report $(SDIR)/distill.json --out $@
	@cat $@
