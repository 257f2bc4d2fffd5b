# %% [markdown]
# # Site check
#
# A placeholder that wires the tutorial plugin: the tutorials are executed when the site is built.

# %%
import hf_seqmodels

print(hf_seqmodels.__version__)
