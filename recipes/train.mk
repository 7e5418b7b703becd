# Shared by the recipes that train models named by their config files (deb.mk, adapt): one model per
# MODEL.yaml, trained into work/MODEL, restarted or resumed as its inputs change.
# Included after the recipe has set WORK, STAMPS, BIN (the data-bin), MODELS, TIME, STEPS, DEVICE and
# MTKIT; TRAIN_ARGS adds options to every `mtkit train`. A recipe adds prerequisites of its own to
# $(STAMPS)/MODEL.fresh (e.g. a parent model) as extra rule lines.

TRAIN_ARGS ?=

# A new config or new data: the model starts from scratch (its old directory is removed).
$(STAMPS)/%.fresh: %.yaml $(BIN)/meta.json
	rm -rf $(WORK)/$*
	@mkdir -p $(@D)
	@touch $@

# A budget change (TIME, STEPS) runs training again, which resumes from the last checkpoint.
$(STAMPS)/%.budget: FORCE
	$(call value_stamp,$@,max_time=$(TIME) max_steps=$(STEPS))

# Named here so make does not take them for intermediate files of a chain and delete them after the run.
.PHONY: stamps
stamps: $(foreach m,$(MODELS),$(STAMPS)/$(m).fresh $(STAMPS)/$(m).budget)

$(STAMPS)/%.trained: %.yaml $(STAMPS)/%.fresh $(STAMPS)/%.budget
	$(MTKIT) train $< --max-time $(TIME) --max-steps $(STEPS) --device $(DEVICE) $(TRAIN_ARGS)
	@touch $@
