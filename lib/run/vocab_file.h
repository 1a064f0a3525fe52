// OUT/vocab.json: the id → character table of a run whose token ids depend on its data (the text
// dataset's char tokenizer), written by rank 0 when the run starts and compared on --resume: the
// weights of a checkpoint trained on one vocabulary would read other characters under another.
#pragma once
#include <string>

namespace dtrain {

inline constexpr const char* kVocabularyFile = "vocab.json";

// Writes DIR/vocab.json (replacing it) unless `vocabulary` (Dataset::vocabulary_json) is empty.
void write_vocabulary_file(const std::string& dir, const std::string& vocabulary);

// What differs between DIR/vocab.json and the dataset's `vocabulary` now, as a message naming the
// file (and where the lists first differ); empty when they agree (both absent counts as agreeing).
std::string vocabulary_mismatch(const std::string& dir, const std::string& vocabulary,
                                const std::string& dataset);

}  // namespace dtrain
