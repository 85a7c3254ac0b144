#include "data/data_prepare.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <optional>

#include <fmt/format.h>

#include "data/encoding_pipeline.h"
#include "data/indexed_dataset_writer.h"
#include "data/indexed_token_stream.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"
#include "util/input_error.h"
#include "util/progress_line.h"

namespace xtrain::data {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string format_count(double value) {
  if (value >= 1e9) return fmt::format("{:.2f}G", value / 1e9);
  if (value >= 1e6) return fmt::format("{:.2f}M", value / 1e6);
  if (value >= 1e3) return fmt::format("{:.1f}k", value / 1e3);
  return fmt::format("{:.0f}", value);
}

std::string format_duration(double seconds) {
  const auto total = static_cast<int64_t>(std::llround(seconds));
  if (total >= 3600) return fmt::format("{}h{:02}m", total / 3600, (total % 3600) / 60);
  if (total >= 60) return fmt::format("{}m{:02}s", total / 60, total % 60);
  return fmt::format("{}s", total);
}

RecordForm record_form(const std::string& format) {
  if (format == "jsonl") return RecordForm::Text;
  if (format == "chat") return RecordForm::Conversation;
  return RecordForm::Any;
}

std::vector<DocumentInput> prepare_inputs(const PrepareOptions& options) {
  if (options.inputs.empty()) throw InputError("no input files (--input FILE...)");
  if (options.format != "auto" && options.format != "text" && options.format != "jsonl" && options.format != "chat")
    throw InputError("unknown format '" + options.format + "' (expected auto, text, jsonl or chat)");
  std::vector<DocumentInput> inputs;
  for (const auto& path : options.inputs) {
    std::error_code error;
    if (fs::is_directory(path, error))
      throw InputError(path + ": is a directory; pass its files (e.g. " + path + "/*.txt)");
    if (!fs::exists(path, error)) throw InputError("file not found: " + path);
    const bool jsonl = options.format == "auto" ? fs::path(path).extension() == ".jsonl" : options.format != "text";
    inputs.push_back({jsonl ? DocumentInput::Kind::JsonlFile : DocumentInput::Kind::TextFile, path, {}});
  }
  return inputs;
}

}  // namespace

PrepareResult write_indexed_dataset(DocumentReader& reader, RecordForm form, const DocumentEncoder& encoder,
                                    int workers, const std::string& prefix, IndexedDType dtype,
                                    const std::function<void(const PrepareResult&)>& on_chunk) {
  PrepareResult result;
  result.dtype = dtype;
  IndexedDatasetWriter tokens(prefix, dtype);
  // Written alongside in case a conversation comes; dropped unwritten when none does.
  IndexedDatasetWriter loss_mask(IndexedTokenStream::loss_mask_prefix(prefix), IndexedDType::UInt8);
  std::vector<int64_t> mask;
  encode_documents(reader, form, encoder, workers, [&](EncodedChunk&& chunk) {
    for (const auto& document : chunk.documents) {
      tokens.add_document(document.tokens);
      mask.assign(document.tokens.size(), 1);
      if (!document.loss_mask.empty()) {
        result.loss_mask = true;
        mask.assign(document.loss_mask.begin(), document.loss_mask.end());
      }
      loss_mask.add_document(mask);
    }
    result.documents += static_cast<int64_t>(chunk.documents.size());
    result.bytes += chunk.bytes;
    result.tokens = tokens.num_tokens();
    if (on_chunk) on_chunk(result);
  });
  tokens.finish();
  if (result.loss_mask) {
    loss_mask.finish();
  } else {
    // A mask left by an earlier run over the same prefix would be read with these tokens.
    const std::string stale = IndexedTokenStream::loss_mask_prefix(prefix);
    fs::remove(index_path(stale));
    fs::remove(data_path(stale));
  }
  result.tokens = tokens.num_tokens();
  return result;
}

PrepareResult prepare_indexed_dataset(const PrepareOptions& options, util::ProgressLine* progress) {
  const auto started = Clock::now();
  const auto tokenizer = text::make_tokenizer(options.tokenizer);
  const DocumentEncoder encoder(*tokenizer, text::ChatTemplate::parse(options.chat_template));
  DocumentReader reader(prepare_inputs(options));
  if (options.output_prefix.empty()) throw InputError("no output prefix (--output PREFIX)");
  const fs::path parent = fs::path(options.output_prefix).parent_path();
  if (!parent.empty()) fs::create_directories(parent);

  const double total_mb = static_cast<double>(reader.total_bytes()) / 1e6;
  auto report = [&](const PrepareResult& so_far) {
    if (!progress || !progress->due()) return;
    const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
    const double mb = static_cast<double>(so_far.bytes) / 1e6;
    const double rate = seconds > 0 ? mb / seconds : 0.0;
    progress->update(fmt::format("{} documents | {} tokens | {:.1f}/{:.1f} MB | {:.1f} MB/s | eta {}",
                                 format_count(static_cast<double>(so_far.documents)),
                                 format_count(static_cast<double>(so_far.tokens)), mb, total_mb, rate,
                                 rate > 0 ? format_duration((total_mb - mb) / rate) : "?"));
  };
  PrepareResult result = write_indexed_dataset(reader, record_form(options.format), encoder, options.workers,
                                               options.output_prefix, token_dtype_for_vocab(tokenizer->vocab_size()),
                                               report);
  result.workers = resolve_workers(options.workers);
  result.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  if (progress)
    progress->finish(fmt::format("{} documents | {} tokens | {:.1f} MB | {:.1f} MB/s | done in {}",
                                 format_count(static_cast<double>(result.documents)),
                                 format_count(static_cast<double>(result.tokens)), static_cast<double>(result.bytes) / 1e6,
                                 static_cast<double>(result.bytes) / 1e6 / std::max(result.seconds, 1e-9),
                                 format_duration(result.seconds)));
  return result;
}

}  // namespace xtrain::data
