# `cmake --install build [--prefix P]`: the binaries into P/bin, the shipped data into P/share/dtsim
# (what data_dir() finds from the binary's own folder, so the prefix can be moved), the docs into
# P/share/doc/dtsim. The data tree mirrors the source tree, so relative paths inside scenarios
# (scenarios/models/...) still resolve.
install(TARGETS dtsim dtsim-train RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(TARGET dtsim_cudnn)
  set_target_properties(dtsim_cudnn PROPERTIES INSTALL_RPATH_USE_LINK_PATH TRUE)  # CUDA outside the default paths
  install(TARGETS dtsim_cudnn LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/dtsim)
endif()

install(DIRECTORY platforms/ DESTINATION ${DTSIM_INSTALL_DATA_DIR}/platforms FILES_MATCHING PATTERN "*.yaml")
install(FILES calibrate/data/calibration.json calibrate/data/gpu_kernels.json calibrate/data/thread_scaling.json
        DESTINATION ${DTSIM_INSTALL_DATA_DIR}/calibrate/data)
install(DIRECTORY scenarios/ DESTINATION ${DTSIM_INSTALL_DATA_DIR}/scenarios
        FILES_MATCHING PATTERN "*.yaml" PATTERN "figures" EXCLUDE)
install(DIRECTORY models/examples/ DESTINATION ${DTSIM_INSTALL_DATA_DIR}/models/examples FILES_MATCHING PATTERN "*.yaml")
install(FILES benchmarks/data/open-measurements.yaml benchmarks/data/tf-benchmarks-2017.yaml
        DESTINATION ${DTSIM_INSTALL_DATA_DIR}/benchmarks/data)
install(PROGRAMS plots/plot_results.py DESTINATION ${DTSIM_INSTALL_DATA_DIR}/plots)
install(FILES README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR} FILES_MATCHING PATTERN "*.md")
