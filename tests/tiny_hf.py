"""Tiny randomly initialised Hugging Face models of every supported family, saved to disk
in the Hugging Face layout (config.json, model.safetensors, tokenizer files or an image
processor), so that tests run attnkit's real loading path on them."""

from __future__ import annotations

from pathlib import Path

import torch

WORDS = [
    "the",
    "a",
    "two",
    "dogs",
    "dog",
    "is",
    "are",
    "playing",
    "in",
    "snow",
    "man",
    "woman",
    "red",
    "blue",
    "ball",
    "park",
    "runs",
    "on",
    "grass",
    "children",
    "child",
    "water",
    "street",
    "city",
    "a",
    "big",
    "small",
    "green",
    "yellow",
    "black",
    "white",
    "house",
    "car",
]
SPECIAL = ["<pad>", "<unk>", "<s>", "</s>", "[CLS]", "[SEP]", "[MASK]"]
# the families built here, each with the layout attnkit finds for it
FAMILIES = {
    "bert": "encoder",
    "roberta": "encoder",
    "xlm-roberta": "encoder",
    "distilbert": "encoder",
    "gpt2": "decoder",
    "llama": "decoder",
    "mistral": "decoder",
    "qwen2": "decoder",
    "t5": "seq2seq",
    "bart": "seq2seq",
    "marian": "seq2seq",
    "vit": "vision",
}
SMALL = {"hidden": 32, "heads": 4, "layers": 2, "ffn": 64}


def _tokenizer(path: Path, *, bos: bool, eos: bool, cls_sep: bool):
    """A word-level tokenizer over WORDS, saved as tokenizer.json with its special tokens."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {t: i for i, t in enumerate(SPECIAL + WORDS + [".", ","])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()])
    if cls_sep:
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])]
        )
    elif bos or eos:
        single = ("<s> " if bos else "") + "$A" + (" </s>" if eos else "")
        tok.post_processor = processors.TemplateProcessing(
            single=single, special_tokens=[("<s>", vocab["<s>"]), ("</s>", vocab["</s>"])]
        )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<pad>",
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
    )
    fast.save_pretrained(path)
    return len(vocab), vocab


def _byte_level_tokenizer(path: Path, family: str):
    """A byte-level BPE (as GPT-2's and Qwen2's), trained on sentences of WORDS and saved by the family's
    own tokenizer class, so that transformers' AutoTokenizer reads it back as it reads the real ones."""
    import json
    import random

    import transformers as T
    from tokenizers import ByteLevelBPETokenizer

    rng = random.Random(0)
    lines = [" ".join(rng.choice(WORDS) for _ in range(8)) + " ." for _ in range(500)]
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(lines, vocab_size=400, min_frequency=1, special_tokens=SPECIAL, show_progress=False)
    trained = json.loads(bpe.to_str())["model"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in trained["merges"]]
    cls = T.Qwen2Tokenizer if family == "qwen2" else T.GPT2Tokenizer
    tok = cls(
        vocab=trained["vocab"], merges=merges, unk_token="<unk>", pad_token="<pad>", eos_token="</s>", bos_token="<s>"
    )
    tok.save_pretrained(path)
    return len(trained["vocab"]), trained["vocab"]


def build(family: str, path: Path, *, positions: int = 64) -> Path:
    """Save a tiny ``family`` model (one of FAMILIES) to ``path``; returns ``path``.
    ``positions``: the longest input of a decoder-only Llama-style model (llama, mistral, qwen2)."""
    import transformers as T

    torch.manual_seed(0)
    path.mkdir(parents=True, exist_ok=True)
    h, heads, layers, ffn = SMALL["hidden"], SMALL["heads"], SMALL["layers"], SMALL["ffn"]
    if family == "vit":
        config = T.ViTConfig(
            hidden_size=h,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            intermediate_size=ffn,
            image_size=32,
            patch_size=8,
        )
        T.ViTImageProcessor(size={"height": 32, "width": 32}).save_pretrained(path)
        T.ViTModel(config, add_pooling_layer=False).save_pretrained(path)
        return path
    encoder = family in ("bert", "roberta", "xlm-roberta", "distilbert")
    if family in ("gpt2", "qwen2"):
        n, vocab = _byte_level_tokenizer(path, family)
    else:
        n, vocab = _tokenizer(
            path, bos=family in ("llama", "mistral"), eos=family in ("t5", "bart", "marian"), cls_sep=encoder
        )
    pad, bos, eos = vocab["<pad>"], vocab["<s>"], vocab["</s>"]
    common = dict(vocab_size=n, pad_token_id=pad, bos_token_id=bos, eos_token_id=eos)
    if family == "bert":
        model = T.BertForMaskedLM(
            T.BertConfig(
                hidden_size=h,
                num_hidden_layers=layers,
                num_attention_heads=heads,
                intermediate_size=ffn,
                max_position_embeddings=64,
                **common,
            )
        )
    elif family in ("roberta", "xlm-roberta"):
        cls = T.XLMRobertaConfig if family == "xlm-roberta" else T.RobertaConfig
        model_cls = T.XLMRobertaForMaskedLM if family == "xlm-roberta" else T.RobertaForMaskedLM
        model = model_cls(
            cls(
                hidden_size=h,
                num_hidden_layers=layers,
                num_attention_heads=heads,
                intermediate_size=ffn,
                max_position_embeddings=66,
                **common,
            )
        )
    elif family == "distilbert":
        model = T.DistilBertForMaskedLM(
            T.DistilBertConfig(
                dim=h, n_layers=layers, n_heads=heads, hidden_dim=ffn, max_position_embeddings=64, **common
            )
        )
    elif family == "gpt2":
        model = T.GPT2LMHeadModel(T.GPT2Config(n_embd=h, n_layer=layers, n_head=heads, n_positions=64, **common))
    elif family in ("llama", "mistral", "qwen2"):
        cfg_cls = {"llama": T.LlamaConfig, "mistral": T.MistralConfig, "qwen2": T.Qwen2Config}[family]
        model_cls = {"llama": T.LlamaForCausalLM, "mistral": T.MistralForCausalLM, "qwen2": T.Qwen2ForCausalLM}[family]
        model = model_cls(
            cfg_cls(
                hidden_size=h,
                num_hidden_layers=layers,
                num_attention_heads=heads,
                num_key_value_heads=2,  # grouped key/value heads
                intermediate_size=ffn,
                max_position_embeddings=positions,
                **common,
            )
        )
    elif family == "t5":
        model = T.T5ForConditionalGeneration(
            T.T5Config(
                d_model=h,
                d_kv=h // heads,
                d_ff=ffn,
                num_layers=layers,
                num_decoder_layers=layers,
                num_heads=heads,
                relative_attention_num_buckets=8,
                decoder_start_token_id=pad,
                **common,
            )
        )
    elif family in ("bart", "marian"):
        cfg_cls = T.MarianConfig if family == "marian" else T.BartConfig
        model_cls = T.MarianMTModel if family == "marian" else T.BartForConditionalGeneration
        model = model_cls(
            cfg_cls(
                d_model=h,
                encoder_layers=layers,
                decoder_layers=layers,
                encoder_attention_heads=heads,
                decoder_attention_heads=heads,
                encoder_ffn_dim=ffn,
                decoder_ffn_dim=ffn,
                max_position_embeddings=64,
                decoder_start_token_id=pad if family == "marian" else eos,
                forced_eos_token_id=None,
                **common,
            )
        )
    else:
        raise ValueError(family)
    model.save_pretrained(path)
    return path


def build_vision_language(path: Path) -> Path:
    """Save a tiny LLaVA (a CLIP vision tower of 4 x 4 patches and a [CLS], a Llama language model)
    with its processor (a CLIP image processor that crops a 32 x 32 centre, the word-level tokenizer
    with an ``<image>`` token), as ``attnkit.load`` reads a vision-language model from disk."""
    import transformers as T

    torch.manual_seed(0)
    path.mkdir(parents=True, exist_ok=True)
    h, heads, layers, ffn = SMALL["hidden"], SMALL["heads"], SMALL["layers"], SMALL["ffn"]
    _, vocab = _tokenizer(path, bos=True, eos=False, cls_sep=False)
    tok = T.AutoTokenizer.from_pretrained(path)
    tok.add_special_tokens({"additional_special_tokens": ["<image>"]})
    vision = T.CLIPVisionConfig(
        hidden_size=h, intermediate_size=ffn, num_hidden_layers=layers, num_attention_heads=heads, image_size=32,
        patch_size=8, projection_dim=h,
    )  # fmt: skip
    text = T.LlamaConfig(
        hidden_size=h, intermediate_size=ffn, num_hidden_layers=layers, num_attention_heads=heads,
        num_key_value_heads=2, vocab_size=len(tok), max_position_embeddings=128, pad_token_id=vocab["<pad>"],
        bos_token_id=vocab["<s>"], eos_token_id=vocab["</s>"],
    )  # fmt: skip
    config = T.LlavaConfig(
        vision_config=vision,
        text_config=text,
        image_token_id=tok.convert_tokens_to_ids("<image>"),
        vision_feature_layer=-1,
    )
    images = T.CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    processor = T.LlavaProcessor(
        image_processor=images,
        tokenizer=tok,
        patch_size=8,
        vision_feature_select_strategy="default",
        image_token="<image>",
        num_additional_image_tokens=1,
    )
    processor.save_pretrained(path)
    T.LlavaForConditionalGeneration(config).save_pretrained(path)
    return path


def build_gemma3_vision(path: Path) -> Path:
    """Save a tiny Gemma 3 with images (a SigLIP tower of 8 x 8 patches, pooled to 4 x 4 image
    tokens; a language model of a sliding-window layer and a global one) with its processor (the
    word-level tokenizer with Gemma 3's image tokens), as ``attnkit.load`` reads it from disk."""
    import transformers as T

    torch.manual_seed(0)
    path.mkdir(parents=True, exist_ok=True)
    h, heads, layers, ffn = SMALL["hidden"], SMALL["heads"], SMALL["layers"], SMALL["ffn"]
    _tokenizer(path, bos=True, eos=False, cls_sep=False)
    marks = {"boi_token": "<start_of_image>", "image_token": "<image_soft_token>", "eoi_token": "<end_of_image>"}
    tok = T.AutoTokenizer.from_pretrained(path, extra_special_tokens=marks)
    vision = T.SiglipVisionConfig(
        hidden_size=h, intermediate_size=ffn, num_hidden_layers=layers, num_attention_heads=heads, image_size=32,
        patch_size=4,
    )  # fmt: skip
    text = T.Gemma3TextConfig(
        hidden_size=h, intermediate_size=ffn, num_hidden_layers=layers, num_attention_heads=heads,
        num_key_value_heads=2, head_dim=8, vocab_size=len(tok), max_position_embeddings=256, sliding_window=16,
        layer_types=["sliding_attention", "full_attention"], pad_token_id=0,
    )  # fmt: skip
    config = T.Gemma3Config(
        text_config=text,
        vision_config=vision,
        mm_tokens_per_image=16,
        boi_token_index=tok.boi_token_id,
        eoi_token_index=tok.eoi_token_id,
        image_token_index=tok.image_token_id,
    )
    images = T.Gemma3ImageProcessorPil(size={"height": 32, "width": 32})
    T.Gemma3Processor(image_processor=images, tokenizer=tok, image_seq_length=16).save_pretrained(path)
    T.Gemma3ForConditionalGeneration(config).save_pretrained(path)
    return path


SPEECH_SPECIAL = ["<|endoftext|>", "<|startoftranscript|>", "<|en|>", "<|transcribe|>", "<|notimestamps|>"]


def build_speech(
    path: Path,
    *,
    seconds: int = 2,
    words: list[str] | None = None,
    hidden: int = SMALL["hidden"],
    bins: int = 16,
    save: bool = True,
):
    """Save a tiny Whisper (2 encoder and 2 decoder layers of 4 heads, ``bins`` mel bins) with its
    processor (a feature extractor of ``seconds``-long windows: 50 encoder positions a second, and a
    byte-level BPE tokenizer over ``words`` with Whisper's special tokens), as ``attnkit.load`` reads
    a speech model from disk; ``save`` false: (model, processor) unsaved, for a benchmark to train."""
    words = words or WORDS
    import json
    import random
    import tempfile

    import transformers as T
    from tokenizers import ByteLevelBPETokenizer

    torch.manual_seed(0)
    path.mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    lines = [" ".join(rng.choice(words) for _ in range(8)) + " ." for _ in range(500)]
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(lines, vocab_size=300, min_frequency=1, special_tokens=SPEECH_SPECIAL, show_progress=False)
    trained = json.loads(bpe.to_str())["model"]
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "vocab.json").write_text(json.dumps(trained["vocab"]))
        merges = [m if isinstance(m, str) else " ".join(m) for m in trained["merges"]]
        Path(tmp, "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n")
        end = "<|endoftext|>"
        tok = T.WhisperTokenizer(
            str(Path(tmp, "vocab.json")), str(Path(tmp, "merges.txt")), unk_token=end, bos_token=end, eos_token=end,
            pad_token=end,
        )  # fmt: skip
    tok.add_special_tokens({"additional_special_tokens": SPEECH_SPECIAL[1:]})
    features = T.WhisperFeatureExtractor(feature_size=bins, chunk_length=seconds)
    vocab = tok.get_vocab()
    config = T.WhisperConfig(
        vocab_size=len(tok), num_mel_bins=bins, d_model=hidden, encoder_layers=SMALL["layers"],
        decoder_layers=SMALL["layers"], encoder_attention_heads=SMALL["heads"], decoder_attention_heads=SMALL["heads"],
        encoder_ffn_dim=2 * hidden, decoder_ffn_dim=2 * hidden, max_source_positions=features.nb_max_frames // 2,
        max_target_positions=32, pad_token_id=vocab[end], bos_token_id=vocab[end], eos_token_id=vocab[end],
        decoder_start_token_id=vocab["<|startoftranscript|>"], begin_suppress_tokens=None, suppress_tokens=None,
    )  # fmt: skip
    processor = T.WhisperProcessor(feature_extractor=features, tokenizer=tok)
    model = T.WhisperForConditionalGeneration(config)
    if not save:
        return model, processor
    processor.save_pretrained(path)
    model.save_pretrained(path)
    return path


def tone(seconds: float, *, rate: int = 16000, pitch: float = 440.0, silence: float = 0.0):
    """A sine ``pitch`` Hz for ``seconds`` and then ``silence`` seconds of nothing, as float samples."""
    import numpy as np

    t = np.arange(int((seconds + silence) * rate)) / rate
    return (0.5 * np.sin(2 * np.pi * pitch * t) * (t < seconds)).astype(np.float32)
